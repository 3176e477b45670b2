package manifestcheck

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func loadBundle(t *testing.T) *Bundle {
	t.Helper()
	objs, err := Objects()
	if err != nil {
		t.Fatalf("decoding manifests: %v", err)
	}
	b, err := NewBundle(objs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	listed, err := Resources()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob(filepath.Join(Dir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(Dir(), "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range append(onDisk, crds...) {
		if f, _ = filepath.Rel(Dir(), f); filepath.Base(f) != "kustomization.yaml" {
			want = append(want, f)
		}
	}
	got := append([]string(nil), listed...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kustomization resources %v, manifests on disk %v", got, want)
	}
}

func TestEveryObjectInKubeSystem(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		m := o.(interface {
			GetNamespace() string
			GetName() string
		})
		_, clusterScoped := o.(*rbacv1.ClusterRole)
		if _, crb := o.(*rbacv1.ClusterRoleBinding); crb {
			clusterScoped = true
		}
		if _, crd := o.(*apiextensionsv1.CustomResourceDefinition); crd {
			clusterScoped = true
		}
		if !clusterScoped && m.GetNamespace() != "kube-system" {
			t.Errorf("%T %s in namespace %q", o, m.GetName(), m.GetNamespace())
		}
	}
}

func TestManifestsAreSafe(t *testing.T) {
	for _, err := range loadBundle(t).Check() {
		t.Error(err)
	}
}

func TestDeploymentAsDocumented(t *testing.T) {
	b := loadBundle(t)
	d := b.Deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	c := b.Container()
	wantArgs := []string{"--cloud-provider=digitalocean", "--cloud-config=/etc/do/cloud.json",
		"--namespace=kube-system", "--leader-elect=true", "--v=4"}
	if !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("args = %v, want %v", c.Args, wantArgs)
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/doks-autoscaler/cluster-autoscaler:") {
		t.Errorf("image = %s", c.Image)
	}
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("cpu request = %s", got.String())
	}
	if got := c.Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("300Mi")) != 0 {
		t.Errorf("memory request = %s", got.String())
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("cpu limit set: throttling slows the simulation for no benefit")
	}
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The example must hold placeholders only.
	if cc.ClusterID != "<CLUSTER_ID>" || cc.Token != "" {
		t.Errorf("cloud.json example = %+v, want placeholder cluster_id and no token", cc)
	}
	name, key, _, err := b.MountedFile(cc.TokenFile)
	if err != nil || name != "digitalocean-token" || key != "access-token" {
		t.Errorf("token_file %s → Secret %q key %q (%v), want digitalocean-token/access-token", cc.TokenFile, name, key, err)
	}
	// Tags mode: safe next to DOKS's managed autoscaler (the binary's own
	// default stays auto_scale).
	if cc.NodePoolSelection != "tags" {
		t.Errorf("node_pool_selection = %q, want tags", cc.NodePoolSelection)
	}
}

// The autoscaler's pods have a PodDisruptionBudget that lets one go at a
// time, so the nodes they run on can be drained.
func TestPodDisruptionBudgetLetsOneReplicaGo(t *testing.T) {
	b := loadBundle(t)
	pdb := b.PodDisruptionBudget
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget in deploy/")
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if got := pdb.Spec.Selector.MatchLabels; !reflect.DeepEqual(got, b.Deployment.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", got, b.Deployment.Spec.Selector.MatchLabels)
	}
}

// TestRBACCoversTheAutoscaler lists what the autoscaler does against the API
// server; a missing permission shows up as a Forbidden error in its log.
func TestRBACCoversTheAutoscaler(t *testing.T) {
	b := loadBundle(t)
	type need struct{ group, resource, verb, name, why string }
	cluster := []need{
		{"", "nodes", "list", "", "node informer"},
		{"", "nodes", "watch", "", "node informer"},
		{"", "nodes", "get", "", "re-read a node before tainting"},
		{"", "nodes", "update", "", "ToBeDeletedByClusterAutoscaler taint, and its removal"},
		{"", "pods", "list", "", "pod informer"},
		{"", "pods", "watch", "", "pod informer"},
		{"", "pods/eviction", "create", "", "drain"},
		{"", "events", "create", "", "events on pods and nodes"},
		{"", "events", "patch", "", "event aggregation"},
		{"policy", "poddisruptionbudgets", "list", "", "drain rules"},
		{"policy", "poddisruptionbudgets", "watch", "", "drain rules"},
		{"apps", "daemonsets", "list", "", "DaemonSet pods on new nodes"},
		{"apps", "replicasets", "watch", "", "drain controller check"},
		{"apps", "statefulsets", "list", "", "drain controller check"},
		{"", "replicationcontrollers", "list", "", "drain controller check"},
		{"batch", "jobs", "watch", "", "drain controller check"},
		{"", "namespaces", "list", "", "InterPodAffinity namespaceSelector"},
		{"", "services", "watch", "", "PodTopologySpread default constraints"},
		{"", "persistentvolumeclaims", "list", "", "volume plugins"},
		{"", "persistentvolumes", "watch", "", "volume plugins"},
		{"storage.k8s.io", "storageclasses", "list", "", "VolumeBinding"},
		{"storage.k8s.io", "csinodes", "watch", "", "NodeVolumeLimits"},
		{"storage.k8s.io", "csidrivers", "list", "", "VolumeBinding"},
		{"storage.k8s.io", "csistoragecapacities", "watch", "", "VolumeBinding"},
		{"storage.k8s.io", "volumeattachments", "list", "", "NodeVolumeLimits"},
		{"resource.k8s.io", "resourceslices", "watch", "", "DRA: devices per node"},
		{"resource.k8s.io", "resourceclaims", "list", "", "DRA: pods' claims"},
		{"resource.k8s.io", "resourceclaimtemplates", "get", "", "DRA: claims not created yet"},
		{"resource.k8s.io", "deviceclasses", "watch", "", "DRA: device classes"},
		{"autoscaling.x-k8s.io", "provisioningrequests", "list", "", "ProvisioningRequest informer"},
		{"autoscaling.x-k8s.io", "provisioningrequests", "watch", "", "ProvisioningRequest informer"},
		{"autoscaling.x-k8s.io", "provisioningrequests", "delete", "r", "requests finished a week ago"},
		{"autoscaling.x-k8s.io", "provisioningrequests/status", "update", "r", "conditions"},
		{"", "podtemplates", "list", "", "ProvisioningRequest pod sets"},
	}
	for _, n := range cluster {
		if !Allows(b.ClusterRole.Rules, n.group, n.resource, n.verb, n.name) {
			t.Errorf("ClusterRole does not allow %s %s/%s (%s)", n.verb, n.group, n.resource, n.why)
		}
	}
	ns := []need{
		{"", "configmaps", "list", "", "priority expander informer"},
		{"", "configmaps", "watch", "", "priority expander informer"},
		{"", "configmaps", "create", "", "first status write"},
		{"", "configmaps", "get", "cluster-autoscaler-status", "status write"},
		{"", "configmaps", "update", "cluster-autoscaler-status", "status write"},
		{"", "configmaps", "delete", "cluster-autoscaler-status", "status removed on exit"},
		{"coordination.k8s.io", "leases", "create", "", "leader election"},
		{"coordination.k8s.io", "leases", "get", "cluster-autoscaler", "leader election"},
		{"coordination.k8s.io", "leases", "update", "cluster-autoscaler", "lease renewal"},
	}
	for _, n := range ns {
		if !Allows(b.Role.Rules, n.group, n.resource, n.verb, n.name) {
			t.Errorf("Role does not allow %s %s/%s %s (%s)", n.verb, n.group, n.resource, n.name, n.why)
		}
	}
}

func TestRBACDeniesTheRest(t *testing.T) {
	b := loadBundle(t)
	tests := []struct {
		rules                       []rbacv1.PolicyRule
		group, resource, verb, name string
	}{
		{b.ClusterRole.Rules, "", "secrets", "get", "digitalocean-token"},
		{b.ClusterRole.Rules, "", "secrets", "list", ""},
		{b.ClusterRole.Rules, "", "nodes", "delete", "node-1"},
		{b.ClusterRole.Rules, "", "pods", "delete", "p"},
		{b.ClusterRole.Rules, "", "pods/status", "update", "p"},
		{b.ClusterRole.Rules, "apps", "deployments", "update", "d"},
		{b.ClusterRole.Rules, "autoscaling.x-k8s.io", "capacitybuffers", "update", "b"},
		{b.ClusterRole.Rules, "", "podtemplates", "create", ""},
		{b.ClusterRole.Rules, "autoscaling.x-k8s.io", "provisioningrequests", "update", "r"},
		{b.ClusterRole.Rules, "autoscaling.x-k8s.io", "provisioningrequests", "create", ""},
		{b.ClusterRole.Rules, "", "pods", "create", ""},
		{b.ClusterRole.Rules, "", "configmaps", "list", ""},
		{b.ClusterRole.Rules, "resource.k8s.io", "resourceclaims", "update", "c"},
		{b.ClusterRole.Rules, "resource.k8s.io", "resourceclaims/status", "patch", "c"},
		{b.ClusterRole.Rules, "resource.k8s.io", "resourceslices", "create", ""},
		{b.Role.Rules, "", "secrets", "get", "digitalocean-token"},
		{b.Role.Rules, "", "configmaps", "update", "coredns"},
		{b.Role.Rules, "", "configmaps", "delete", "coredns"},
		{b.Role.Rules, "", "configmaps", "update", "cluster-autoscaler-priority-expander"},
		{b.Role.Rules, "", "configmaps", "get", "cluster-autoscaler-priority-expander"},
		{b.Role.Rules, "", "configmaps", "get", "coredns"},
		{b.Role.Rules, "coordination.k8s.io", "leases", "update", "kube-scheduler"},
		{b.Role.Rules, "coordination.k8s.io", "leases", "delete", "cluster-autoscaler"},
	}
	for _, tc := range tests {
		if Allows(tc.rules, tc.group, tc.resource, tc.verb, tc.name) {
			t.Errorf("allowed: %s %s/%s %s", tc.verb, tc.group, tc.resource, tc.name)
		}
	}
}

// TestChecksCatchUnsafeChanges makes sure the checks used above (and by the
// chart test) fail on the mistakes they exist for.
func TestChecksCatchUnsafeChanges(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *Bundle)
		want   string
	}{
		{"root filesystem writable", func(b *Bundle) { b.Container().SecurityContext.ReadOnlyRootFilesystem = nil }, "readOnlyRootFilesystem"},
		{"privilege escalation", func(b *Bundle) { v := true; b.Container().SecurityContext.AllowPrivilegeEscalation = &v }, "allowPrivilegeEscalation"},
		{"capabilities kept", func(b *Bundle) { b.Container().SecurityContext.Capabilities = nil }, "capabilities"},
		{"root user", func(b *Bundle) {
			var zero int64
			b.Container().SecurityContext.RunAsUser = &zero
		}, "runAsUser"},
		{"no seccomp", func(b *Bundle) {
			b.Container().SecurityContext.SeccompProfile = nil
			b.Deployment.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"writable token mount", func(b *Bundle) { b.Container().VolumeMounts[1].ReadOnly = false }, "writable"},
		{"token file path mismatch", func(b *Bundle) {
			b.CloudConfig.StringData["cloud.json"] = `{"cluster_id":"x","token_file":"/etc/token/access-token"}`
		}, "token_file"},
		{"inline token", func(b *Bundle) {
			b.CloudConfig.StringData["cloud.json"] = `{"cluster_id":"x","token":"dop_v1_x"}`
		}, "inline token"},
		{"wrong provider", func(b *Bundle) { b.Container().Args[0] = "--cloud-provider=gce" }, "cloud-provider"},
		{"no liveness", func(b *Bundle) { b.Container().LivenessProbe = nil }, "livenessProbe"},
		{"no memory limit", func(b *Bundle) { delete(b.Container().Resources.Limits, corev1.ResourceMemory) }, "memory limit"},
		{"replicas together", func(b *Bundle) {
			b.Deployment.Spec.Template.Spec.TopologySpreadConstraints = nil
		}, "topology spread"},
		{"wildcard", func(b *Bundle) { b.ClusterRole.Rules[0].Verbs = []string{"*"} }, "wildcard"},
		{"secrets", func(b *Bundle) {
			b.ClusterRole.Rules = append(b.ClusterRole.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		}, "secrets"},
		{"node delete", func(b *Bundle) { b.ClusterRole.Rules[0].Verbs = append(b.ClusterRole.Rules[0].Verbs, "delete") }, "delete on /nodes"},
		{"configmap update unrestricted", func(b *Bundle) { b.Role.Rules[2].ResourceNames = nil }, "no resourceNames"},
		{"repeated provider: the last wins", func(b *Bundle) {
			b.Container().Args = append(b.Container().Args, "--cloud_provider=gce")
		}, "--cloud-provider=\"gce\""},
		{"repeated namespace: the last wins", func(b *Bundle) {
			b.Container().Args = append(b.Container().Args, "--namespace", "default")
		}, "--namespace=\"default\""},
		{"leader election turned off later", func(b *Bundle) {
			b.Container().Args = append(b.Container().Args, "--leader-elect=false")
		}, "without --leader-elect=true"},
		{"address moved away from the probes", func(b *Bundle) {
			b.Container().Args = append(b.Container().Args, "--address=:9090")
		}, "livenessProbe port 8085, want 9090"},
		{"no readiness", func(b *Bundle) { b.Container().ReadinessProbe = nil }, "readinessProbe"},
		{"default grace period", func(b *Bundle) { b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = nil }, "terminationGracePeriodSeconds unset (30)"},
		{"short grace period", func(b *Bundle) {
			g := int64(25)
			b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "terminationGracePeriodSeconds 25 is shorter"},
		{"binding to another SA", func(b *Bundle) { b.RoleBinding.Subjects[0].Name = "default" }, "RoleBinding subjects"},
		{"namespace flag mismatch", func(b *Bundle) { b.Container().Args[2] = "--namespace=default" }, "--namespace"},
		{"not critical", func(b *Bundle) { b.Deployment.Spec.Template.Spec.PriorityClassName = "" }, "priorityClassName"},
		{"auto_scale mode", func(b *Bundle) {
			b.CloudConfig.StringData["cloud.json"] = `{"cluster_id":"x","token_file":"/var/run/secrets/digitalocean/access-token","node_pool_selection":"auto_scale"}`
		}, "node_pool_selection"},
		{"selection mode left out", func(b *Bundle) {
			b.CloudConfig.StringData["cloud.json"] = `{"cluster_id":"x","token_file":"/var/run/secrets/digitalocean/access-token"}`
		}, "node_pool_selection"},
		{"no PDB", func(b *Bundle) { b.PodDisruptionBudget = nil }, "no PodDisruptionBudget"},
		{"PDB allows nothing", func(b *Bundle) { zero := intstr.FromInt32(0); b.PodDisruptionBudget.Spec.MaxUnavailable = &zero }, "allows no disruption"},
		{"PDB keeps every replica", func(b *Bundle) {
			all := intstr.FromString("100%")
			b.PodDisruptionBudget.Spec.MaxUnavailable, b.PodDisruptionBudget.Spec.MinAvailable = nil, &all
		}, "allows no disruption"},
		{"PDB selects other pods", func(b *Bundle) {
			b.PodDisruptionBudget.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "does not match the pod labels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := loadBundle(t)
			tc.mutate(b)
			var msgs []string
			for _, err := range b.Check() {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			if !strings.Contains(all, tc.want) {
				t.Errorf("check did not flag %q; got:\n%s", tc.want, all)
			}
		})
	}
}

// Flags reads args as the binary's flag set does.
func TestFlagsReadLikeTheBinary(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		args    []string
		want    map[string]string
	}{
		{"equals form", nil, []string{"--namespace=kube-system", "--v=4"}, map[string]string{"namespace": "kube-system", "v": "4"}},
		{"single dash", nil, []string{"-namespace=a"}, map[string]string{"namespace": "a"}},
		{"separate value", nil, []string{"--namespace", "a", "--v", "2"}, map[string]string{"namespace": "a", "v": "2"}},
		{"last wins", nil, []string{"--namespace=a", "--namespace=b"}, map[string]string{"namespace": "b"}},
		{"underscore is the same flag", nil, []string{"--cloud-provider=digitalocean", "--cloud_provider=gce"}, map[string]string{"cloud-provider": "gce"}},
		{"bare boolean", nil, []string{"--leader-elect", "--namespace=a"}, map[string]string{"leader-elect": "true", "namespace": "a"}},
		{"boolean does not take the next arg", nil, []string{"--leader-elect", "false"}, map[string]string{"leader-elect": "true"}},
		{"boolean false", nil, []string{"--leader-elect=true", "--leader_elect=false"}, map[string]string{"leader-elect": "false"}},
		{"command and -- end", []string{"/cluster-autoscaler", "--v=1"}, []string{"--v=3", "--", "--v=9"}, map[string]string{"v": "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := loadBundle(t)
			b.Container().Command, b.Container().Args = tc.command, tc.args
			if got := b.Flags(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Flags() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNoRealTokenInRepository(t *testing.T) {
	// DigitalOcean personal access tokens start with dop_v1_.
	entries, err := os.ReadDir(Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(Dir(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "dop_v1_") {
			t.Errorf("%s contains what looks like a DigitalOcean token", e.Name())
		}
	}
}

// The chart installs the same CRD as deploy/ (Helm takes CRDs from crds/
// only, and does not follow a link out of the chart).
func TestChartCRDsAreDeploys(t *testing.T) {
	// The CRD files, not the kustomize component listing them.
	crds, err := filepath.Glob(filepath.Join(Dir(), "crds", "autoscaling.x-k8s.io_*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in deploy/crds (%v)", err)
	}
	for _, f := range crds {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(Dir(), "..", "charts", "cluster-autoscaler-digitalocean", "crds", filepath.Base(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("charts/cluster-autoscaler-digitalocean/crds/%s differs from deploy/crds (%v): copy it", filepath.Base(f), err)
		}
	}
}
