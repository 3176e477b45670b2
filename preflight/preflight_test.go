package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digitalocean/godo"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

const (
	clusterID  = "3f2a9c1e-0000-4000-8000-000000000001"
	otherID    = "3f2a9c1e-0000-4000-8000-00000000dead"
	token      = "dop_v1_preflight-test-token-value"
	wrongToken = "dop_v1_revoked-token-value"
	noTagRead  = "dop_v1_custom-scoped-without-tag-read"
	// noDropletRead is a custom-scoped token without droplet:read.
	noDropletRead = "dop_v1_custom-scoped-without-droplet-read"
	enabledTag    = "k8s-cluster-autoscaler-enabled"
)

func tagged(name string, lo, hi int) doks.PoolSpec {
	return doks.PoolSpec{Name: name, Size: "s-2vcpu-4gb", Count: lo, Tags: []string{enabledTag,
		fmt.Sprintf("k8s-cluster-autoscaler-min:%d", lo), fmt.Sprintf("k8s-cluster-autoscaler-max:%d", hi)}}
}

// simulator starts the DOKS API simulator over real HTTP with pools.
func simulator(t *testing.T, pools ...doks.PoolSpec) *doks.Server {
	t.Helper()
	sim := doks.NewServer(doks.Options{ClusterID: clusterID, Region: "nyc1"})
	sim.SetTokens(token, noTagRead, noDropletRead)
	sim.SetTokenWithoutTagRead(noTagRead)
	sim.SetTokenWithoutDropletRead(noDropletRead)
	sim.SetDropletLimit(doks.DefaultDropletLimit) // every real account has one
	for _, p := range pools {
		if _, err := sim.CreatePool(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	return sim
}

// cloudConfig writes a cloud config; extra fields are merged in.
func cloudConfig(t *testing.T, url, cluster, tok string, extra map[string]any) string {
	t.Helper()
	cfg := map[string]any{"cluster_id": cluster, "token": tok, "url": url}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	p := filepath.Join(t.TempDir(), "cloud.json")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeKube is a Kubernetes API that allows what allow says, serves the
// given API groups and has the namespaces given.
func fakeKube(allow func(authorizationv1.ResourceAttributes) bool, groups []*metav1.APIResourceList, namespaces ...string) *fake.Clientset {
	var objs []runtime.Object
	for _, ns := range namespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ssar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ssar.Status.Allowed = allow(*ssar.Spec.ResourceAttributes)
		return true, ssar, nil
	})
	c.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:cluster-autoscaler"}}}, nil
	})
	d := c.Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	d.Resources = groups
	return c
}

func pflagSet() *pflag.FlagSet { return pflag.NewFlagSet("test", pflag.ContinueOnError) }

func allowAll(authorizationv1.ResourceAttributes) bool { return true }

var draGroup = &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{
	{Name: "resourceslices"}, {Name: "deviceclasses"}, {Name: "resourceclaims"}, {Name: "resourceclaimtemplates"}}}

func options(t *testing.T, cloudConfigPath string, args ...string) config.AutoscalingOptions {
	t.Helper()
	o, err := config.NewFlags(pflagSet()).Parse(append([]string{"--cloud-provider=digitalocean", "--cloud-config=" + cloudConfigPath}, args...))
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	return o
}

// line is the text line of a check, for messages.
func line(r Report, check string) string {
	if x := r.Find(check); x != nil {
		return fmt.Sprintf("%s %s: %s | fix: %s", x.Verdict, x.Check, x.Detail, x.Fix)
	}
	return "(no line " + check + ")"
}

// TestDigitalOceanVerdicts runs the DigitalOcean checks against the
// simulator, godo through the provider's real client, breaking it one way
// per case.
func TestDigitalOceanVerdicts(t *testing.T) {
	deadPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr + "/"
	}()
	autoScaled := doks.PoolSpec{Name: "managed", Size: "s-2vcpu-4gb", Count: 2, AutoScale: true, MinNodes: 1, MaxNodes: 5}
	both := doks.PoolSpec{Name: "both", Size: "s-2vcpu-4gb", Count: 2, AutoScale: true, MinNodes: 1, MaxNodes: 5,
		Tags: []string{enabledTag, "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:5"}}
	typo := doks.PoolSpec{Name: "typo", Size: "s-2vcpu-4gb", Count: 1, Tags: []string{enabledTag, "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:ten"}}
	plain := doks.PoolSpec{Name: "plain", Size: "s-1vcpu-2gb", Count: 1}

	type want struct {
		check   string
		verdict Verdict
		says    []string
	}
	for _, tc := range []struct {
		name    string
		pools   []doks.PoolSpec
		url     string // "" the simulator's
		cluster string
		token   string
		extra   map[string]any
		args    []string
		faults  []doks.Fault
		// otherDroplets: the account's droplets outside the cluster.
		otherDroplets int
		exit          int
		want          []want
	}{
		{
			name:  "tags mode, healthy",
			pools: []doks.PoolSpec{tagged("workers", 1, 6), autoScaled, both, typo, plain},
			extra: map[string]any{"node_pool_selection": "tags"},
			exit:  0,
			want: []want{
				{"do-token", OK, []string{"accepted"}},
				{"do-cluster", OK, []string{"region nyc1", clusterID, "Kubernetes " + doks.VersionSlug}},
				{"do-scope-tag-read", OK, []string{"visible"}},
				{"do-pool/workers", OK, []string{"is a node group by its tags, min 1, max 6, count 1"}},
				{"do-pool/managed", OK, []string{"auto_scale on", "DOKS's managed autoscaler owns it"}},
				{"do-pool/both", Warn, []string{"conflict", enabledTag, "DOKS auto-scale on"}},
				{"do-pool/typo", Warn, []string{`"ten" is not a non-negative whole number`}},
				{"do-pool/plain", OK, []string{"no tag " + enabledTag}},
				{"do-node-groups", OK, []string{"1 of 5 pools are node groups"}},
				{"do-scope-sizes-read", OK, []string{"droplet sizes"}},
				{"do-scope-writes", Warn, []string{"kubernetes:update", "cannot prove"}},
				{"do-scope-droplet-read", OK, []string{"the token has droplet:read", "droplet_limit 25, 7 droplets on the account"}},
			},
		},
		{
			name:  "token without droplet:read: the account answers without droplet_limit",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			token: noDropletRead,
			extra: map[string]any{"node_pool_selection": "tags"},
			exit:  0,
			want: []want{{"do-scope-droplet-read", Warn, []string{"without droplet_limit", "the token lacks it",
				"learnt from DigitalOcean's 422 at the limit", "scale-up of every group backs off"}}},
		},
		{
			name:   "the account may not be read (403)",
			pools:  []doks.PoolSpec{tagged("workers", 1, 6)},
			extra:  map[string]any{"node_pool_selection": "tags"},
			faults: []doks.Fault{{Operation: doks.OpGetAccount, Status: http.StatusForbidden}},
			exit:   0,
			want:   []want{{"do-scope-droplet-read", Warn, []string{"forbidden (403)", "account:read", "422 at the limit"}}},
		},
		{
			name:   "droplets may not be counted (403)",
			pools:  []doks.PoolSpec{tagged("workers", 1, 6)},
			extra:  map[string]any{"node_pool_selection": "tags"},
			faults: []doks.Fault{{Operation: doks.OpListDroplets, Status: http.StatusForbidden}},
			exit:   0,
			want:   []want{{"do-scope-droplet-read", Warn, []string{"droplet_limit 25 read", "lacks droplet:read", "422 at the limit"}}},
		},
		{
			name:          "the account is at its droplet limit",
			pools:         []doks.PoolSpec{tagged("workers", 1, 6)},
			extra:         map[string]any{"node_pool_selection": "tags"},
			otherDroplets: 24,
			exit:          0,
			want:          []want{{"do-scope-droplet-read", Warn, []string{"at its droplet limit: 25 droplets of droplet_limit 25"}}},
		},
		{
			name:  "size preference: one unknown, one not offered here",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			extra: map[string]any{"node_pool_selection": "tags", "autoprovisioning": map[string]any{"sizes": []string{"gpu-*"},
				"size_preference": []string{"gpu-h999x1-1gb", "gpu-mi300x1-192gb", "gpu-h100x1-80gb", "gpu-l40sx1-48gb"}}},
			args: []string{"--node-autoprovisioning-enabled"},
			exit: 0,
			want: []want{
				{"do-autoprovisioning-preference/gpu-h999x1-1gb", Warn, []string{`autoprovisioning.size_preference[0] "gpu-h999x1-1gb" is not a size the Sizes API lists`}},
				{"do-autoprovisioning-preference/gpu-mi300x1-192gb", Warn, []string{`autoprovisioning.size_preference[1] "gpu-mi300x1-192gb" is not offered in nyc1`}},
				{"do-autoprovisioning-preference", OK, []string{"gpu-h100x1-80gb ($3.39000/h), gpu-l40sx1-48gb ($1.57000/h)"}},
			},
		},
		{
			name:  "size preference: none can be created here",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			extra: map[string]any{"node_pool_selection": "tags", "autoprovisioning": map[string]any{"sizes": []string{"gpu-*"},
				"size_preference": []string{"gpu-mi300x1-192gb"}}},
			args: []string{"--node-autoprovisioning-enabled"},
			exit: 1,
			want: []want{{"do-autoprovisioning-preference", Fail, []string{"no size of autoprovisioning.size_preference can be created in nyc1"}}},
		},
		{
			name:  "auto_scale mode: two autoscalers on one pool",
			pools: []doks.PoolSpec{autoScaled, plain},
			exit:  0,
			want: []want{
				{"do-pool/managed", Warn, []string{"node group by auto_scale on, min 1, max 5", "two autoscalers"}},
				{"do-pool/plain", OK, []string{"auto_scale off: not a node group"}},
				{"do-scope-tag-read", OK, []string{"visible"}},
			},
		},
		{
			name:  "auto_scale mode in shadow beside DOKS's autoscaler",
			pools: []doks.PoolSpec{autoScaled},
			args:  []string{"--shadow"},
			exit:  0,
			want: []want{
				{"do-pool/managed", OK, []string{"node group by auto_scale on", "shadow mode (--shadow) this one only records"}},
				{"do-scope-writes", OK, []string{"not used in shadow mode"}},
			},
		},
		{
			name:    "wrong cluster ID",
			pools:   []doks.PoolSpec{tagged("workers", 1, 6)},
			cluster: otherID,
			exit:    1,
			want: []want{
				{"do-token", OK, nil},
				{"do-cluster", Fail, []string{otherID, "not found", "404"}},
			},
		},
		{
			name:  "refused token",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			token: wrongToken,
			exit:  1,
			want:  []want{{"do-token", Fail, []string{"401", "refused the token from the cloud config's token field"}}},
		},
		{
			name: "unreachable API",
			url:  deadPort,
			exit: 1,
			want: []want{{"do-api", Fail, []string{"cannot reach the DigitalOcean API at " + deadPort, "connection refused"}}},
		},
		{
			name:  "token without tag:read in tags mode",
			pools: []doks.PoolSpec{tagged("workers", 1, 6), plain},
			token: noTagRead,
			extra: map[string]any{"node_pool_selection": "tags"},
			exit:  1,
			want: []want{
				{"do-scope-tag-read", Fail, []string{"lacks tag:read", "node_pool_selection=tags"}},
				{"do-node-groups", Warn, []string{"0 of 2"}},
			},
		},
		{
			name:  "token without tag:read in auto_scale mode",
			pools: []doks.PoolSpec{autoScaled},
			token: noTagRead,
			exit:  0,
			want:  []want{{"do-scope-tag-read", OK, []string{"does not need"}}},
		},
		{
			name:  "token without tag:read, consolidation in auto_scale mode",
			pools: []doks.PoolSpec{autoScaled},
			token: noTagRead,
			args:  []string{"--consolidation-enabled"},
			exit:  0,
			want:  []want{{"do-scope-tag-read", Warn, []string{"lacks tag:read", "--consolidation-enabled", "never consolidated"}}},
		},
		{
			name:   "token without sizes:read, no feature needs it",
			pools:  []doks.PoolSpec{tagged("workers", 1, 6)},
			extra:  map[string]any{"node_pool_selection": "tags"},
			faults: []doks.Fault{{Operation: doks.OpListSizes, Status: http.StatusForbidden}},
			exit:   0,
			want:   []want{{"do-scope-sizes-read", Warn, []string{"lacks sizes:read", "no enabled feature"}}},
		},
		{
			name:   "token without sizes:read, the price expander needs it",
			pools:  []doks.PoolSpec{tagged("workers", 1, 6)},
			extra:  map[string]any{"node_pool_selection": "tags"},
			args:   []string{"--expander=price"},
			faults: []doks.Fault{{Operation: doks.OpListSizes, Status: http.StatusForbidden}},
			exit:   1,
			want:   []want{{"do-scope-sizes-read", Fail, []string{"lacks sizes:read", "--expander=price"}}},
		},
		{
			name:  "sizes on demand: one not offered in the region, one unknown",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			extra: map[string]any{"node_pool_selection": "tags", "autoprovisioning": map[string]any{"sizes": []string{"s-1vcpu-2gb", "gpu-mi300x1-192gb", "nope-*"}}},
			args:  []string{"--node-autoprovisioning-enabled"},
			exit:  0,
			want: []want{
				{"do-autoprovisioning/s-1vcpu-2gb", OK, []string{"1 sizes offered in nyc1", "s-1vcpu-2gb $0.01786/h ($12.00/month)"}},
				{"do-autoprovisioning-size/gpu-mi300x1-192gb", Warn, []string{"not offered in nyc1 (only atl1, tor1)", "$1.99000/h"}},
				{"do-autoprovisioning/gpu-mi300x1-192gb", Warn, []string{"only sizes that cannot be created"}},
				{"do-autoprovisioning/nope-*", Warn, []string{"matches no size"}},
				{"do-prices", OK, nil},
			},
		},
		{
			name:  "sizes on demand: none can be created here",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			extra: map[string]any{"node_pool_selection": "tags", "autoprovisioning": map[string]any{"sizes": []string{"gpu-mi300x1-192gb"}}},
			args:  []string{"--node-autoprovisioning-enabled"},
			exit:  1,
			want:  []want{{"do-autoprovisioning", Fail, []string{"no allowed size can be created in nyc1"}}},
		},
		{
			name:  "autoprovisioning flag without the section",
			pools: []doks.PoolSpec{tagged("workers", 1, 6)},
			args:  []string{"--node-autoprovisioning-enabled"},
			exit:  1,
			want:  []want{{"cloud-config", Fail, []string{"no autoprovisioning section"}}},
		},
		{
			name:   "API error on the cluster read",
			pools:  []doks.PoolSpec{tagged("workers", 1, 6)},
			faults: []doks.Fault{{Operation: doks.OpGetCluster, Status: http.StatusServiceUnavailable}},
			exit:   1,
			want:   []want{{"do-api", Fail, []string{"503"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := simulator(t, tc.pools...)
			for _, f := range tc.faults {
				sim.InjectFault(f)
			}
			sim.SetOtherDroplets(tc.otherDroplets)
			url, cluster, tok := sim.URL(), clusterID, token
			if tc.url != "" {
				url = tc.url
			}
			if tc.cluster != "" {
				cluster = tc.cluster
			}
			if tc.token != "" {
				tok = tc.token
			}
			o := options(t, cloudConfig(t, url, cluster, tok, tc.extra), tc.args...)
			r := Run(context.Background(), Options{Autoscaling: o, Kube: fakeKube(allowAll, []*metav1.APIResourceList{draGroup}, "kube-system"), KubeHost: "fake"})
			var text, js bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text.String()+js.String(), tok) {
				t.Errorf("the output shows the token:\n%s", text.String())
			}
			if got := r.ExitCode(); got != tc.exit {
				t.Errorf("exit code %d, want %d:\n%s", got, tc.exit, text.String())
			}
			for _, w := range tc.want {
				x := r.Find(w.check)
				if x == nil {
					t.Errorf("no line %s:\n%s", w.check, text.String())
					continue
				}
				if x.Verdict != w.verdict {
					t.Errorf("%s: verdict %s, want %s", line(r, w.check), x.Verdict, w.verdict)
				}
				for _, s := range w.says {
					if !strings.Contains(x.Detail, s) {
						t.Errorf("%s: detail does not say %q", line(r, w.check), s)
					}
				}
				if x.Verdict != OK && x.Fix == "" {
					t.Errorf("%s: a %s line without a fix", line(r, w.check), x.Verdict)
				}
			}
			if tc.name == "wrong cluster ID" && !strings.Contains(r.Find("do-cluster").Fix, "doctl kubernetes cluster list") {
				t.Errorf("the wrong cluster's fix does not name doctl kubernetes cluster list: %s", line(r, "do-cluster"))
			}
			// Read only: the simulator saw no write.
			if ch := sim.Changes(); len(ch) != 0 {
				t.Errorf("preflight wrote to DigitalOcean: %+v", ch)
			}
			var parsed []map[string]any
			if err := json.Unmarshal(js.Bytes(), &parsed); err != nil || len(parsed) != len(r) {
				t.Fatalf("-o json: %v (%d entries for %d results)", err, len(parsed), len(r))
			}
			for _, e := range parsed {
				if len(e) != 4 || e["check"] == nil || e["verdict"] == nil || e["detail"] == nil || e["fix"] == nil {
					t.Errorf("-o json entry %v: want exactly check, verdict, detail, fix", e)
				}
			}
		})
	}
}

// The Sizes API's available flag: a size that cannot be bought anywhere.
func TestSizeUnavailable(t *testing.T) {
	for _, tc := range []struct {
		size godo.Size
		want string
	}{
		{godo.Size{Slug: "s-1vcpu-2gb", Available: true, Regions: []string{"nyc1"}}, ""},
		{godo.Size{Slug: "s-1vcpu-2gb", Available: false, Regions: []string{"nyc1"}}, "not available"},
		{godo.Size{Slug: "gpu-x", Available: true, Regions: []string{"tor1"}}, "not offered in nyc1 (only tor1)"},
	} {
		if got := sizeUnavailable(tc.size, "nyc1"); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.size, got, tc.want)
		}
	}
}

// TestKubernetesVerdicts checks the Kubernetes side against a fake API that
// answers access reviews from a policy.
func TestKubernetesVerdicts(t *testing.T) {
	sim := simulator(t, tagged("workers", 1, 6))
	cc := cloudConfig(t, sim.URL(), clusterID, token, map[string]any{"node_pool_selection": "tags"})
	prGroup := &metav1.APIResourceList{GroupVersion: "autoscaling.x-k8s.io/v1", APIResources: []metav1.APIResource{{Name: "provisioningrequests"}}}
	noNodeWrites := func(a authorizationv1.ResourceAttributes) bool {
		return !(a.Resource == "nodes" && (a.Verb == "update" || a.Verb == "patch"))
	}
	noStatusConfigMap := func(a authorizationv1.ResourceAttributes) bool { return a.Resource != "configmaps" || a.Name == "" }
	onlyCore := func(a authorizationv1.ResourceAttributes) bool { return a.Group == "" }
	for _, tc := range []struct {
		name       string
		allow      func(authorizationv1.ResourceAttributes) bool
		groups     []*metav1.APIResourceList
		namespaces []string
		args       []string
		exit       int
		want       map[string]Verdict
		says       map[string]string
	}{
		{name: "everything granted", allow: allowAll, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"},
			want: map[string]Verdict{"kube-api": OK, "kube-rbac": OK, "kube-namespace": OK, "kube-lease": OK, "kube-api-group/resource.k8s.io/v1": OK,
				"kube-crd/provisioningrequests.autoscaling.x-k8s.io": OK},
			says: map[string]string{"kube-api": "v1.37.2, as system:serviceaccount:kube-system:cluster-autoscaler", "kube-crd/provisioningrequests.autoscaling.x-k8s.io": "not needed"}},
		{name: "node writes missing", allow: noNodeWrites, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"}, exit: 1,
			want: map[string]Verdict{"kube-rbac/nodes": Fail, "kube-rbac": Fail},
			says: map[string]string{"kube-rbac/nodes": "may not update"}},
		{name: "status ConfigMap by name, in --namespace", allow: noStatusConfigMap, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"autoscaling"},
			args: []string{"--namespace=autoscaling", "--status-config-map-name=ca-status"}, exit: 1,
			want: map[string]Verdict{"kube-rbac/autoscaling/configmaps:ca-status": Fail},
			says: map[string]string{"kube-rbac/autoscaling/configmaps:ca-status": "get, update, delete"}},
		{name: "status ConfigMap not written", allow: noStatusConfigMap, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"},
			args: []string{"--write-status-configmap=false"}, want: map[string]Verdict{"kube-rbac": OK}},
		{name: "DRA not served: its rights are not needed", allow: onlyCore, namespaces: []string{"kube-system"}, exit: 1,
			want: map[string]Verdict{"kube-api-group/resource.k8s.io/v1": Warn, "kube-rbac/pods/eviction": OK + "", "kube-rbac/poddisruptionbudgets.policy": Fail},
			says: map[string]string{"kube-api-group/resource.k8s.io/v1": "runs without DRA"}},
		{name: "ProvisioningRequests on, CRD absent", allow: allowAll, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"},
			args: []string{"--enable-provisioning-requests"}, exit: 1,
			want: map[string]Verdict{"kube-crd/provisioningrequests.autoscaling.x-k8s.io": Fail}},
		{name: "ProvisioningRequests on, CRD served", allow: allowAll, groups: []*metav1.APIResourceList{draGroup, prGroup}, namespaces: []string{"kube-system"},
			args: []string{"--enable-provisioning-requests"},
			want: map[string]Verdict{"kube-crd/provisioningrequests.autoscaling.x-k8s.io": OK}},
		{name: "CapacityBuffer dry run without create on pods", allow: func(a authorizationv1.ResourceAttributes) bool {
			return !(a.Resource == "pods" && a.Subresource == "" && a.Verb == "create")
		},
			groups:     []*metav1.APIResourceList{draGroup, {GroupVersion: "autoscaling.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "capacitybuffers"}}}},
			namespaces: []string{"kube-system"}, args: []string{"--capacity-buffer-controller-enabled"},
			want: map[string]Verdict{"kube-rbac/pods:create (capacity buffer dry run)": Warn, "kube-crd/capacitybuffers.autoscaling.x-k8s.io": OK, "kube-rbac": OK}},
		{name: "pod deletion costs without patch on pods", allow: func(a authorizationv1.ResourceAttributes) bool {
			return !(a.Resource == "pods" && a.Subresource == "" && a.Verb == "patch")
		},
			groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"}, args: []string{"--pod-deletion-cost-on-unneeded-nodes"},
			want: map[string]Verdict{"kube-rbac/pods:patch (pod deletion cost)": Warn, "kube-rbac": OK},
			says: map[string]string{"kube-rbac/pods:patch (pod deletion cost)": "scale-down evicts as without the flag"}},
		{name: "pod deletion costs with patch on pods", allow: allowAll, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"kube-system"},
			args: []string{"--pod-deletion-cost-on-unneeded-nodes"},
			want: map[string]Verdict{"kube-rbac": OK},
			says: map[string]string{"kube-rbac/pods:patch (pod deletion cost)": "may patch pods"}},
		{name: "namespace missing", allow: allowAll, groups: []*metav1.APIResourceList{draGroup}, namespaces: []string{"default"},
			args: []string{"--namespace=autoscaler"}, exit: 1,
			want: map[string]Verdict{"kube-namespace": Fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, cc, tc.args...)
			r := Run(context.Background(), Options{Autoscaling: o, Kube: fakeKube(tc.allow, tc.groups, tc.namespaces...), KubeHost: "fake"})
			var text bytes.Buffer
			_ = r.WriteText(&text)
			if got := r.ExitCode(); got != tc.exit {
				t.Errorf("exit code %d, want %d:\n%s", got, tc.exit, text.String())
			}
			for check, v := range tc.want {
				if v == OK && strings.HasPrefix(check, "kube-rbac/") {
					// A right that is fine has no line of its own.
					if r.Find(check) != nil {
						t.Errorf("unexpected line %s", line(r, check))
					}
					continue
				}
				if x := r.Find(check); x == nil || x.Verdict != v {
					t.Errorf("%s, want %s:\n%s", line(r, check), v, text.String())
				}
			}
			for check, s := range tc.says {
				if x := r.Find(check); x == nil || !strings.Contains(x.Detail, s) {
					t.Errorf("%s does not say %q", line(r, check), s)
				}
			}
		})
	}
}

// The rights come from deploy/'s files: every rule, with --namespace and
// the names of the flags.
func TestNeededAccessFollowsDeploy(t *testing.T) {
	o := config.Defaults()
	o.Namespace, o.LeaderElectResourceName = "ops", "my-lease"
	got, err := neededAccess(o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range got {
		names = append(names, a.String())
	}
	all := strings.Join(names, " ")
	for _, w := range []string{"nodes", "pods/eviction", "poddisruptionbudgets.policy", "ops/leases.coordination.k8s.io:my-lease", "ops/configmaps:cluster-autoscaler-status",
		"provisioningrequests/status.autoscaling.x-k8s.io", "resourceslices.resource.k8s.io"} {
		if !strings.Contains(" "+all+" ", " "+w+" ") {
			t.Errorf("no right %s in %s", w, all)
		}
	}
}

// The command line: exit codes and the two output forms.
func TestCommandLine(t *testing.T) {
	sim := simulator(t, tagged("workers", 1, 6))
	cc := cloudConfig(t, sim.URL(), clusterID, token, map[string]any{"node_pool_selection": "tags"})
	var out, errOut bytes.Buffer
	if code := Main([]string{"--cloud-provider=digitalocean", "--cloud-config=" + cc, "-o", "yaml"}, &out, &errOut); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2 (%s)", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	// No kubeconfig and not in a cluster: the Kubernetes side fails, named.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	code := Main([]string{"--cloud-provider=digitalocean", "--cloud-config=" + cc, "-o", "json"}, &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1; stderr %s", code, errOut.String())
	}
	var parsed []Result
	if err := json.Unmarshal(out.Bytes(), &parsed); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r := Report(parsed)
	if x := r.Find("kube-config"); x == nil || x.Verdict != Fail {
		t.Errorf("kube-config: %s", line(r, "kube-config"))
	}
	if x := r.Find("do-pool/workers"); x == nil || x.Verdict != OK {
		t.Errorf("do-pool/workers: %s", line(r, "do-pool/workers"))
	}
}
