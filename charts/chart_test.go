package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/deploy"
)

func mergeInto(dst, src map[string]interface{}) {
	for k, v := range src {
		if sv, ok := v.(map[string]interface{}); ok {
			if dv, ok := dst[k].(map[string]interface{}); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode turns the rendered YAML files into typed objects; Prometheus
// Operator kinds (not in client-go's scheme) come back as maps.
func decode(t *testing.T, rendered map[string]string) (typed []runtime.Object, crds []map[string]interface{}) {
	t.Helper()
	for name, text := range rendered {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range docSeparator.Split(text, -1) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: invalid YAML: %v\n%s", name, err, doc)
			}
			if tm.Kind == "" {
				continue // empty (disabled template) or comments only
			}
			if strings.HasPrefix(tm.APIVersion, "monitoring.coreos.com/") {
				m := map[string]interface{}{}
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				crds = append(crds, m)
				continue
			}
			objs, err := deploy.Decode([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			typed = append(typed, objs...)
		}
	}
	return typed, crds
}

func renderBundle(t *testing.T, rel release) (*deploy.Bundle, []runtime.Object, []map[string]interface{}, map[string]string) {
	t.Helper()
	rendered, err := render(t, rel)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	typed, crds := decode(t, rendered)
	b, err := deploy.NewBundle(typed)
	if err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	return b, typed, crds, rendered
}

func deployBundle(t *testing.T) *deploy.Bundle {
	t.Helper()
	objs, err := deploy.Objects()
	if err != nil {
		t.Fatal(err)
	}
	b, err := deploy.NewBundle(objs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withClusterID(extra map[string]interface{}) map[string]interface{} {
	v := map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": "5f4a-cluster-uuid"}}
	mergeInto(v, extra)
	return v
}

func TestChartRequiresClusterID(t *testing.T) {
	t.Parallel()
	_, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system"})
	if err == nil || !strings.Contains(err.Error(), "cloudConfig.clusterID is required") {
		t.Fatalf("rendering without a cluster ID: err = %v, want the required message", err)
	}
}

func TestChartDefaults(t *testing.T) {
	t.Parallel()
	b, typed, crds, rendered := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)})
	for _, err := range b.Check() {
		t.Error(err)
	}
	if len(crds) != 0 {
		t.Errorf("ServiceMonitor rendered by default")
	}
	for _, o := range typed {
		if _, ok := o.(*corev1.Service); ok {
			t.Error("Service rendered by default")
		}
	}

	// With release name cluster-autoscaler in kube-system the chart installs
	// what deploy/ does, object for object.
	d := deployBundle(t)
	if b.Deployment.Name != d.Deployment.Name || b.CloudConfig.Name != d.CloudConfig.Name || b.ServiceAccount.Name != d.ServiceAccount.Name {
		t.Errorf("names differ from deploy/: %s %s %s", b.Deployment.Name, b.CloudConfig.Name, b.ServiceAccount.Name)
	}
	if *b.Deployment.Spec.Replicas != 2 {
		t.Errorf("replicas = %d", *b.Deployment.Spec.Replicas)
	}
	if got, want := b.Container().Image, "ghcr.io/doks-autoscaler/cluster-autoscaler:0.1.0"; got != want {
		t.Errorf("image = %s, want %s (appVersion)", got, want)
	}
	wantArgs := []string{
		"--cloud-provider=digitalocean", "--cloud-config=/etc/do/cloud.json", "--namespace=kube-system",
		"--leader-elect=true", "--scan-interval=10s", "--expander=least-waste",
		"--max-node-provision-time=15m", "--balance-similar-node-groups=false", "--v=4",
	}
	if !reflect.DeepEqual(b.Container().Args, wantArgs) {
		t.Errorf("args:\n%v\nwant:\n%v", b.Container().Args, wantArgs)
	}
	// Same pod hardening and resources as deploy/.
	if !reflect.DeepEqual(b.Container().SecurityContext, d.Container().SecurityContext) ||
		!reflect.DeepEqual(b.Deployment.Spec.Template.Spec.SecurityContext, d.Deployment.Spec.Template.Spec.SecurityContext) {
		t.Error("securityContext differs from deploy/")
	}
	if !reflect.DeepEqual(b.Container().Resources, d.Container().Resources) {
		t.Errorf("resources %v differ from deploy/ %v", b.Container().Resources, d.Container().Resources)
	}
	if !reflect.DeepEqual(b.Container().VolumeMounts, d.Container().VolumeMounts) ||
		!reflect.DeepEqual(b.Deployment.Spec.Template.Spec.Volumes, d.Deployment.Spec.Template.Spec.Volumes) {
		t.Error("volumes differ from deploy/")
	}
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.ClusterID != "5f4a-cluster-uuid" || cc.URL != "" || cc.Token != "" {
		t.Errorf("cloud.json = %+v", cc)
	}
	dcc, _ := d.ParseCloudConfig()
	if cc.TokenFile != dcc.TokenFile {
		t.Errorf("token_file %s, deploy/ has %s", cc.TokenFile, dcc.TokenFile)
	}
	if cc.NodePoolSelection != "tags" {
		t.Errorf("node_pool_selection = %q, want tags (safe next to DOKS's managed autoscaler)", cc.NodePoolSelection)
	}
	if pdb := b.PodDisruptionBudget; pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget = %+v, want maxUnavailable 1", pdb)
	}
	if !strings.Contains(rendered["NOTES.txt"], "create secret generic digitalocean-token --from-literal=access-token=") {
		t.Errorf("NOTES.txt does not say how to create the token Secret:\n%s", rendered["NOTES.txt"])
	}
}

func TestChartRBACEqualsDeploy(t *testing.T) {
	t.Parallel()
	d := deployBundle(t)
	for _, rel := range []release{
		{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)},
		{name: "ca", namespace: "autoscaler", values: withClusterID(map[string]interface{}{"replicas": 1})},
	} {
		b, _, _, _ := renderBundle(t, rel)
		if got, want := deploy.Grants(b.ClusterRole.Rules), deploy.Grants(d.ClusterRole.Rules); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ClusterRole grants\n%v\ndeploy/ grants\n%v", rel.name, got, want)
		}
		if got, want := deploy.Grants(b.Role.Rules), deploy.Grants(d.Role.Rules); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Role grants\n%v\ndeploy/ grants\n%v", rel.name, got, want)
		}
	}
}

// overrideValues set every common value away from its default.
func overrideValues() map[string]interface{} {
	return withClusterID(map[string]interface{}{
		"replicas": 3,
		"image":    map[string]interface{}{"tag": "v1.2.3"},
		"cloudConfig": map[string]interface{}{
			"tokenSecretName": "do-api", "tokenSecretKey": "token", "url": "https://api.example.test/",
		},
		"scanInterval":                  "30s",
		"expander":                      "priority,least-waste",
		"scaleDownUnneededTime":         "5m",
		"scaleDownUtilizationThreshold": 0.65,
		"maxNodeProvisionTime":          "20m",
		"balanceSimilarNodeGroups":      true,
		"v":                             2,
		"extraArgs": map[string]interface{}{
			"max-nodes-total": 20, "skip-nodes-with-local-storage": false,
			"status-config-map-name": "ca-status", "leader-elect-resource-name": "ca-lock",
		},
		"nodeSelector":   map[string]interface{}{"doks.digitalocean.com/node-pool": "system"},
		"tolerations":    []interface{}{map[string]interface{}{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}},
		"podAnnotations": map[string]interface{}{"example.com/team": "platform"},
		"serviceAccount": map[string]interface{}{"name": "ca-sa", "annotations": map[string]interface{}{"example.com/owner": "ops"}},
		"serviceMonitor": map[string]interface{}{"enabled": true, "interval": "15s", "labels": map[string]interface{}{"release": "prom"}},
	})
}

// A threshold of 0 (keep every node that has any request) is passed, not
// taken for "unset".
func TestChartPassesZeroThreshold(t *testing.T) {
	t.Parallel()
	b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system",
		values: withClusterID(map[string]interface{}{"scaleDownUtilizationThreshold": 0})})
	found := false
	for _, a := range b.Container().Args {
		found = found || a == "--scale-down-utilization-threshold=0"
	}
	if !found {
		t.Errorf("args %v lack --scale-down-utilization-threshold=0", b.Container().Args)
	}
}

func TestChartOverrides(t *testing.T) {
	t.Parallel()
	values := overrideValues()
	b, typed, crds, _ := renderBundle(t, release{name: "ca", namespace: "autoscaler", values: values})
	for _, err := range b.Check() {
		t.Error(err)
	}
	if b.Deployment.Name != "ca-cluster-autoscaler" || b.Deployment.Namespace != "autoscaler" {
		t.Errorf("deployment %s/%s", b.Deployment.Namespace, b.Deployment.Name)
	}
	if *b.Deployment.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *b.Deployment.Spec.Replicas)
	}
	if b.Container().Image != "ghcr.io/doks-autoscaler/cluster-autoscaler:v1.2.3" {
		t.Errorf("image = %s", b.Container().Image)
	}
	for flag, want := range map[string]string{
		"cloud-provider": "digitalocean", "namespace": "autoscaler", "scan-interval": "30s",
		"expander": "priority,least-waste", "scale-down-unneeded-time": "5m",
		"scale-down-utilization-threshold": "0.65", "max-node-provision-time": "20m",
		"balance-similar-node-groups": "true", "v": "2", "max-nodes-total": "20",
		"skip-nodes-with-local-storage": "false", "status-config-map-name": "ca-status",
		"leader-elect-resource-name": "ca-lock",
	} {
		if got, ok := b.Flag(flag); !ok || got != want {
			t.Errorf("--%s=%q (present %v), want %q", flag, got, ok, want)
		}
	}
	// RBAC follows the renamed status ConfigMap and Lease.
	if !deploy.Allows(b.Role.Rules, "", "configmaps", "update", "ca-status") ||
		deploy.Allows(b.Role.Rules, "", "configmaps", "update", "cluster-autoscaler-status") {
		t.Error("Role does not follow status-config-map-name")
	}
	if !deploy.Allows(b.Role.Rules, "coordination.k8s.io", "leases", "update", "ca-lock") {
		t.Error("Role does not follow leader-elect-resource-name")
	}
	// The token comes from the renamed Secret and key, where cloud.json says.
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.URL != "https://api.example.test/" {
		t.Errorf("url = %q", cc.URL)
	}
	if name, key, _, err := b.MountedFile(cc.TokenFile); err != nil || name != "do-api" || key != "token" {
		t.Errorf("token_file %s → %s/%s (%v), want do-api/token", cc.TokenFile, name, key, err)
	}
	spec := b.Deployment.Spec.Template.Spec
	if spec.NodeSelector["doks.digitalocean.com/node-pool"] != "system" {
		t.Errorf("nodeSelector = %v", spec.NodeSelector)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" || spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("tolerations = %+v", spec.Tolerations)
	}
	if b.Deployment.Spec.Template.Annotations["example.com/team"] != "platform" {
		t.Errorf("pod annotations = %v", b.Deployment.Spec.Template.Annotations)
	}
	if spec.ServiceAccountName != "ca-sa" || b.ServiceAccount.Name != "ca-sa" || b.ServiceAccount.Annotations["example.com/owner"] != "ops" {
		t.Errorf("service account %s / %+v", spec.ServiceAccountName, b.ServiceAccount.ObjectMeta)
	}
	// Metrics: a Service on :8085 and a ServiceMonitor selecting it.
	var svc *corev1.Service
	for _, o := range typed {
		if s, ok := o.(*corev1.Service); ok {
			svc = s
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8085 || svc.Spec.Ports[0].Name != "metrics" {
		t.Fatalf("metrics Service = %+v", svc)
	}
	for k, v := range svc.Spec.Selector {
		if b.Deployment.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the pods", k, v)
		}
	}
	if len(crds) != 1 || crds[0]["kind"] != "ServiceMonitor" {
		t.Fatalf("ServiceMonitor not rendered: %v", crds)
	}
	sm := crds[0]
	if sm["metadata"].(map[string]interface{})["labels"].(map[string]interface{})["release"] != "prom" {
		t.Errorf("ServiceMonitor labels: %v", sm["metadata"])
	}
	ep := sm["spec"].(map[string]interface{})["endpoints"].([]interface{})[0].(map[string]interface{})
	if ep["port"] != "metrics" || ep["interval"] != "15s" || ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoint = %v", ep)
	}
}

func TestChartWithoutRBACAndServiceAccount(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{
		"rbac":           map[string]interface{}{"create": false},
		"serviceAccount": map[string]interface{}{"create": false, "name": "preexisting"},
	})
	rendered, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	if err != nil {
		t.Fatal(err)
	}
	typed, _ := decode(t, rendered)
	var dep *appsv1.Deployment
	for _, o := range typed {
		switch v := o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding, *corev1.ServiceAccount:
			t.Errorf("%T rendered with rbac.create/serviceAccount.create false", v)
		case *appsv1.Deployment:
			dep = v
		}
	}
	if dep == nil || dep.Spec.Template.Spec.ServiceAccountName != "preexisting" {
		t.Errorf("deployment service account not the given one: %+v", dep)
	}

	// Not creating the ServiceAccount without naming one is a mistake.
	values = withClusterID(map[string]interface{}{"serviceAccount": map[string]interface{}{"create": false}})
	if _, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values}); err == nil ||
		!strings.Contains(err.Error(), "serviceAccount.name is required") {
		t.Errorf("err = %v", err)
	}
}

func TestChartCloudConfigEscaping(t *testing.T) {
	t.Parallel()
	// Values end up inside JSON: quotes and backslashes must not break it.
	values := withClusterID(map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": `a"b\c`}})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.ClusterID != `a"b\c` {
		t.Errorf("cluster_id = %q", cc.ClusterID)
	}
}

func TestChartMetadata(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]interface{}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c["apiVersion"] != "v2" || c["name"] != chartDir {
		t.Errorf("Chart.yaml apiVersion %v name %v", c["apiVersion"], c["name"])
	}
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	if v, _ := c["version"].(string); !semver.MatchString(v) {
		t.Errorf("version %v is not SemVer 2", c["version"])
	}
	if c["appVersion"] == nil {
		t.Error("no appVersion (the default image tag)")
	}
}

func TestChartRollsPodsWhenCloudConfigChanges(t *testing.T) {
	t.Parallel()
	checksum := func(clusterID string) string {
		values := map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": clusterID}}
		b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
		return b.Deployment.Spec.Template.Annotations["checksum/cloud-config"]
	}
	a, again, other := checksum("cluster-a"), checksum("cluster-a"), checksum("cluster-b")
	if len(a) != 64 || a != again {
		t.Errorf("checksum not stable: %q %q", a, again)
	}
	if a == other {
		t.Error("pod template unchanged when the cloud config changes: pods would keep the old config")
	}
}

func TestChartNodePoolSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   interface{}
		want    string // node_pool_selection in cloud.json
		wantErr string
	}{
		{"tags", "tags", ""},
		{"auto_scale", "auto_scale", ""},
		{"Tags", "", `nodePoolSelection "Tags" is not valid`},
		{"", "", `nodePoolSelection "" is not valid`},
		{"auto-scale", "", `nodePoolSelection "auto-scale" is not valid`},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.value), func(t *testing.T) {
			t.Parallel()
			rel := release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(map[string]interface{}{"nodePoolSelection": tc.value})}
			if tc.wantErr != "" {
				if _, err := render(t, rel); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			b, _, _, rendered := renderBundle(t, rel)
			cc, err := b.ParseCloudConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cc.NodePoolSelection != tc.want {
				t.Errorf("node_pool_selection = %q, want %q", cc.NodePoolSelection, tc.want)
			}
			if !strings.Contains(rendered["NOTES.txt"], "Node pool selection: "+tc.want+".") {
				t.Errorf("NOTES.txt does not name the mode:\n%s", rendered["NOTES.txt"])
			}
		})
	}
}

func TestChartPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		value      interface{}
		none       bool
		minA, maxU string
		wantErr    string
	}{
		{"default", nil, false, "", "1", ""},
		{"maxUnavailable 50%", map[string]interface{}{"maxUnavailable": "50%"}, false, "", "50%", ""},
		{"minAvailable instead", map[string]interface{}{"minAvailable": 1, "maxUnavailable": nil}, false, "1", "", ""},
		{"both", map[string]interface{}{"minAvailable": 1}, false, "", "", "set minAvailable or maxUnavailable, not both"},
		{"off with null", "null", true, "", "", ""},
		{"off with {}", map[string]interface{}{"maxUnavailable": nil}, true, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			values := withClusterID(nil)
			switch v := tc.value.(type) {
			case nil:
			case string: // "null": the whole value removed
				values["podDisruptionBudget"] = nil
			default:
				values["podDisruptionBudget"] = v
			}
			rel := release{name: "ca", namespace: "kube-system", values: values}
			if tc.wantErr != "" {
				if _, err := render(t, rel); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			b, _, _, _ := renderBundle(t, rel)
			pdb := b.PodDisruptionBudget
			if tc.none {
				if pdb != nil {
					t.Fatalf("PodDisruptionBudget rendered: %+v", pdb.Spec)
				}
				return
			}
			if pdb == nil {
				t.Fatal("no PodDisruptionBudget")
			}
			str := func(v interface{ String() string }, isNil bool) string {
				if isNil {
					return ""
				}
				return v.String()
			}
			if got := str(pdb.Spec.MinAvailable, pdb.Spec.MinAvailable == nil); got != tc.minA {
				t.Errorf("minAvailable = %q, want %q", got, tc.minA)
			}
			if got := str(pdb.Spec.MaxUnavailable, pdb.Spec.MaxUnavailable == nil); got != tc.maxU {
				t.Errorf("maxUnavailable = %q, want %q", got, tc.maxU)
			}
			if pdb.Name != b.Deployment.Name || pdb.Namespace != "kube-system" {
				t.Errorf("PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name)
			}
			for k, v := range pdb.Spec.Selector.MatchLabels {
				if b.Deployment.Spec.Template.Labels[k] != v {
					t.Errorf("selector %s=%s does not match the pods %v", k, v, b.Deployment.Spec.Template.Labels)
				}
			}
		})
	}
}

// extraArgs may not override the flags the chart derives from the release,
// in any spelling the binary would read as the same flag.
func TestChartRefusesOverridingItsOwnFlags(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"cloud-provider", "cloud_provider", "cloud-config", "cloud_config", "cloud-config_2",
		"namespace", "namespace_1", "--namespace", "leader-elect", "leader_elect", "address", "-address",
	} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			values := withClusterID(map[string]interface{}{"extraArgs": map[string]interface{}{key: "x", "max-nodes-total": 5}})
			_, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
			if err == nil || !strings.Contains(err.Error(), "extraArgs."+key+": --") || !strings.Contains(err.Error(), "is set by the chart") {
				t.Errorf("err = %v, want extraArgs.%s refused", err, key)
			}
		})
	}
	// Flags that only share a prefix are fine.
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(map[string]interface{}{
		"extraArgs": map[string]interface{}{"leader-elect-resource-name": "ca-lock", "leader-elect-lease-duration": "20s", "namespaces-ignored": "x"},
	})})
	if v, _ := b.Flag("leader-elect-resource-name"); v != "ca-lock" {
		t.Errorf("--leader-elect-resource-name = %q", v)
	}
}

// extraArgs in upstream's chart's forms: name: value, a bare flag (null), and
// a repeated flag (name_<anything>).
func TestChartExtraArgsUpstreamForms(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{"extraArgs": map[string]interface{}{
		"max-nodes-total":                  50,
		"scale-down-enabled":               nil,
		"skip-nodes-with-system-pods":      false,
		"startup-taint_1":                  "node.cilium.io/agent-not-ready",
		"startup-taint_2":                  "example.com/booting",
		"scale-down-utilization-threshold": 0.65,
	}})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	args := b.Container().Args
	for _, want := range []string{
		"--max-nodes-total=50", "--scale-down-enabled", "--skip-nodes-with-system-pods=false",
		"--startup-taint=node.cilium.io/agent-not-ready", "--startup-taint=example.com/booting",
		"--scale-down-utilization-threshold=0.65",
	} {
		found := false
		for _, a := range args {
			found = found || a == want
		}
		if !found {
			t.Errorf("args %v lack %s", args, want)
		}
	}
}

func TestChartTerminationGracePeriod(t *testing.T) {
	t.Parallel()
	b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(nil)})
	if g := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 60 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 60", g)
	}
	b, _, _, _ = renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"terminationGracePeriodSeconds": 120})})
	if g := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 120 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 120", g)
	}
	_, err := render(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"terminationGracePeriodSeconds": 30})})
	if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds 30 is shorter than the autoscaler's shutdown") {
		t.Errorf("err = %v, want the grace period refused", err)
	}
}
