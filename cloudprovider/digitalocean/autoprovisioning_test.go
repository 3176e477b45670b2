package digitalocean

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

func TestAutoprovisioningConfigRules(t *testing.T) {
	base := `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "autoprovisioning": %s}`
	for _, c := range []struct{ name, section, want string }{
		{"minimal", `{"sizes": ["s-*"]}`, ""},
		{"full", `{"sizes": ["s-*", "gpu-h100x1-80gb", "c-?"], "max_nodes_per_pool": 3, "name_prefix": "auto-"}`, ""},
		{"no sizes", `{}`, "autoprovisioning.sizes is empty"},
		{"empty sizes", `{"sizes": []}`, "autoprovisioning.sizes is empty"},
		{"upper case", `{"sizes": ["s-*", "S-2VCPU"]}`, `autoprovisioning.sizes[1] "S-2VCPU" is not a size slug or pattern`},
		{"character class", `{"sizes": ["s-[12]vcpu"]}`, "autoprovisioning.sizes[0]"},
		{"blank", `{"sizes": [""]}`, "autoprovisioning.sizes[0]"},
		{"twice", `{"sizes": ["s-*", "s-*"]}`, `autoprovisioning.sizes[1] "s-*" is listed twice`},
		{"max zero", `{"sizes": ["s-*"], "max_nodes_per_pool": 0}`, "autoprovisioning.max_nodes_per_pool 0 is not between 1 and 1000"},
		{"max huge", `{"sizes": ["s-*"], "max_nodes_per_pool": 5000}`, "autoprovisioning.max_nodes_per_pool 5000"},
		{"max not a number", `{"sizes": ["s-*"], "max_nodes_per_pool": "3"}`, `field "autoprovisioning.max_nodes_per_pool" must be a int`},
		{"prefix upper", `{"sizes": ["s-*"], "name_prefix": "Auto"}`, `autoprovisioning.name_prefix "Auto" is not valid`},
		{"prefix digit first", `{"sizes": ["s-*"], "name_prefix": "1a"}`, "autoprovisioning.name_prefix"},
		{"unknown field", `{"sizes": ["s-*"], "max_nodes": 3}`, `unknown field "max_nodes"`},
		{"taint keys", `{"sizes": ["s-*"], "taint_keys": ["dedicated", "example.com/team"]}`, ""},
		{"taint key blank", `{"sizes": ["s-*"], "taint_keys": [""]}`, `autoprovisioning.taint_keys[0] "" is not a valid taint key`},
		{"taint key invalid", `{"sizes": ["s-*"], "taint_keys": ["dedicated", "a b"]}`, `autoprovisioning.taint_keys[1] "a b" is not a valid taint key`},
		{"taint key twice", `{"sizes": ["s-*"], "taint_keys": ["dedicated", "dedicated"]}`, `autoprovisioning.taint_keys[1] "dedicated" is listed twice`},
		{"taint key of Kubernetes", `{"sizes": ["s-*"], "taint_keys": ["node.kubernetes.io/unschedulable"]}`,
			`autoprovisioning.taint_keys[0] "node.kubernetes.io/unschedulable" is in the kubernetes.io namespace, whose taints Kubernetes, the autoscaler or DOKS set`},
		{"taint key of the autoscaler", `{"sizes": ["s-*"], "taint_keys": ["cluster-autoscaler.kubernetes.io/x"]}`, "is in the kubernetes.io namespace"},
		{"taint key of k8s.io", `{"sizes": ["s-*"], "taint_keys": ["k8s.io/x"]}`, "is in the k8s.io namespace"},
		{"taint key of DOKS", `{"sizes": ["s-*"], "taint_keys": ["doks.digitalocean.com/x"]}`, "is in the digitalocean.com namespace"},
		{"the deletion taint", `{"sizes": ["s-*"], "taint_keys": ["ToBeDeletedByClusterAutoscaler"]}`,
			`autoprovisioning.taint_keys[0] "ToBeDeletedByClusterAutoscaler" is a taint the autoscaler or DOKS sets itself`},
		{"the GPU taint", `{"sizes": ["s-*"], "taint_keys": ["nvidia.com/gpu"]}`, "is a taint the autoscaler or DOKS sets itself"},
		{"taint keys not a list", `{"sizes": ["s-*"], "taint_keys": "dedicated"}`, `field "autoprovisioning.taint_keys" must be a []string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig([]byte(fmt.Sprintf(base, c.section)))
			endsWithError(t, err, c.want)
		})
	}
}

func TestAutoprovisioningNeedsItsSection(t *testing.T) {
	cfg, err := parseConfig([]byte(`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t"}`))
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.NodeAutoprovisioningEnabled = true
	_, err = newCloudProvider(cfg, opts, nil, defaultClientOptions())
	endsWithError(t, err, "--node-autoprovisioning-enabled is set but the cloud config has no autoprovisioning section")
}

// A pool's name is derived from its planned group (so the name sent is the
// one looked for after a lost answer): the first free sequence number, a
// DNS label however long the prefix and slug.
func TestPoolNameIsAFreeDNSLabelDerivedFromThePlan(t *testing.T) {
	taken := map[string]bool{}
	id := plannedGroupID("gpu-h100x1-80gb", cloudprovider.Carried{Labels: map[string]string{"team": "ml"}})
	for i := 1; i <= 50; i++ {
		name, err := poolName("ca-", id, func(n string) bool { return taken[n] })
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("ca-%s-%d", strings.TrimPrefix(id, "autoprovisioned-"), i)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 || name != want {
			t.Fatalf("name %q (%v), want %q", name, errs, want)
		}
		again, _ := poolName("ca-", id, func(n string) bool { return taken[n] })
		if again != name {
			t.Fatalf("the same plan and pools gave %q, then %q", name, again)
		}
		taken[name] = true
	}
	long, err := poolName("averyveryverylongprefix", plannedIDPrefix+strings.Repeat("x", 60), func(string) bool { return false })
	if err != nil || len(long) > 63 || len(validation.IsDNS1123Label(long)) > 0 {
		t.Errorf("long name %q (%d): %v", long, len(long), err)
	}
	if _, err := poolName("ca-", plannedIDPrefix+"s-1vcpu-2gb", func(string) bool { return true }); err == nil {
		t.Error("every name taken: want an error")
	}
}

func TestPlannedGroupIDIsStable(t *testing.T) {
	labels := func(l map[string]string) cloudprovider.Carried { return cloudprovider.Carried{Labels: l} }
	a := plannedGroupID("s-8vcpu-16gb", labels(map[string]string{"team": "a", "x": "y"}))
	b := plannedGroupID("s-8vcpu-16gb", labels(map[string]string{"x": "y", "team": "a"}))
	c := plannedGroupID("s-8vcpu-16gb", labels(map[string]string{"team": "b", "x": "y"}))
	if a != b || a == c || plannedGroupID("s-8vcpu-16gb", cloudprovider.Carried{}) != "autoprovisioned-s-8vcpu-16gb" {
		t.Errorf("ids %q %q %q", a, b, c)
	}
}

// Planned group IDs, hence the names of the pools created from them, are
// those earlier releases gave: a pool created before an upgrade whose
// answer was lost is found again by its name after it. The values were
// taken from the release before cloudprovider.Carried.
func TestPlannedGroupIDsKeepTheirNames(t *testing.T) {
	ml := apiv1.Taint{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}
	cases := []struct {
		slug    string
		carried cloudprovider.Carried
		want    string
	}{
		{"s-8vcpu-16gb", cloudprovider.Carried{Labels: map[string]string{"team": "a", "x": "y"}}, "autoprovisioned-s-8vcpu-16gb-0207d979"},
		{"s-8vcpu-16gb", cloudprovider.Carried{Labels: map[string]string{"dedicated": "ml"}, Taints: []apiv1.Taint{ml}}, "autoprovisioned-s-8vcpu-16gb-06762417"},
		{"gpu-h100x1-80gb", cloudprovider.Carried{Taints: []apiv1.Taint{{Key: "a", Effect: apiv1.TaintEffectNoSchedule},
			{Key: "b", Value: "v", Effect: apiv1.TaintEffectNoExecute}}}, "autoprovisioned-gpu-h100x1-80gb-b4ac0acc"},
	}
	for _, c := range cases {
		if got := plannedGroupID(c.slug, c.carried); got != c.want {
			t.Errorf("plannedGroupID(%s, %q) = %s, want %s", c.slug, c.carried.Key(), got, c.want)
		}
	}
}

// The prediction from a size must never promise more than DOKS's template
// (here the simulator's) gives, or a pool would be created for a pod that
// does not fit its nodes.
func TestPredictedTemplateIsOnTheSafeSide(t *testing.T) {
	e := newEnv(t, doks.Options{})
	sizes, err := e.p.pricing.catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range sizes {
		if !slices.Contains(size.Regions, doks.DefaultRegion) {
			continue
		}
		// Created through the API, as DOKS creates pools: a GPU pool gets its taint.
		name := "p-" + strings.ReplaceAll(size.Slug, ".", "")
		if _, _, err := e.godoClient().Kubernetes.CreateNodePool(t.Context(), testCluster,
			&godo.KubernetesNodePoolCreateRequest{Name: name, Size: size.Slug, Count: 1}); err != nil {
			t.Fatal(err)
		}
		real, _, err := e.godoClient().Kubernetes.GetNodePoolTemplate(t.Context(), testCluster, name)
		if err != nil {
			t.Fatal(err)
		}
		pred := predictTemplate(size, "x", nil, nil, nil)
		if pred.Allocatable.CpuMilliCores > real.Template.Allocatable.CpuMilliCores {
			t.Errorf("%s: predicted %dm allocatable, real %dm", size.Slug, pred.Allocatable.CpuMilliCores, real.Template.Allocatable.CpuMilliCores)
		}
		pm, rm := resource.MustParse(pred.Allocatable.Memory), resource.MustParse(real.Template.Allocatable.Memory)
		if pm.Cmp(rm) > 0 {
			t.Errorf("%s: predicted %s allocatable memory, real %s", size.Slug, pred.Allocatable.Memory, real.Template.Allocatable.Memory)
		}
		var realGPU int64
		if real.Template.Gpu != nil {
			realGPU = real.Template.Gpu.Count
		}
		if d := templateDifference(pred, real.Template); pred.Capacity.CpuMilliCores != real.Template.Capacity.CpuMilliCores ||
			(pred.Gpu == nil) != (realGPU == 0) || strings.Contains(d, "capacity") || strings.Contains(d, "gpu") || strings.Contains(d, "taints") {
			t.Errorf("%s: capacity, GPU or taints differ: %s", size.Slug, d)
		}
	}
}

const napSection = `{"sizes": ["s-*", "m-*", "gpu-h100x1-80gb", "gpu-mi300x1-192gb"], "max_nodes_per_pool": 4, "taint_keys": ["dedicated"]}`

// A planned group's template is what a node of the created pool will be:
// the taints asked for whose keys taint_keys allows (the others left off,
// in the template and in the creation request alike), DOKS's GPU taint on a
// GPU size, and on a cluster running the vendor's DRA driver the slice that
// driver will publish (gpu.nvidia.com for an NVIDIA size, gpu.amd.com for
// an AMD one) instead of the extended resource.
func TestPlannedGroupTemplateTaintsAndDevices(t *testing.T) {
	e := newEnv(t, doks.Options{Region: "tor1"}, withAutoprovisioning(napSection))
	e.refresh()
	e.p.SetDRAListers(draListers(t, gpudriver.DeviceClass(gpudriver.NVIDIA), gpudriver.DeviceClass(gpudriver.AMD)))
	sep := apiv1.Taint{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}
	other := apiv1.Taint{Key: "team", Value: "a", Effect: apiv1.TaintEffectNoSchedule}
	for _, c := range []struct {
		size           string
		taints         []apiv1.Taint
		wantTemplate   []string
		wantRequest    []string
		driver         string
		extendedRemain apiv1.ResourceName
	}{
		{"s-2vcpu-4gb", []apiv1.Taint{other, sep}, []string{"dedicated=ml:NoSchedule"}, []string{"dedicated=ml:NoSchedule"}, "", ""},
		{"gpu-h100x1-80gb", nil, []string{"nvidia.com/gpu:NoSchedule"}, nil, gpudriver.NVIDIA, gpu.ResourceNvidiaGPU},
		{"gpu-mi300x1-192gb", []apiv1.Taint{sep}, []string{"amd.com/gpu:NoSchedule", "dedicated=ml:NoSchedule"}, []string{"dedicated=ml:NoSchedule"}, gpudriver.AMD, gpu.ResourceAMDGPU},
	} {
		t.Run(c.size, func(t *testing.T) {
			g, err := e.p.NewNodeGroup(c.size, map[string]string{"dedicated": "ml"}, nil, c.taints, nil)
			if err != nil {
				t.Fatal(err)
			}
			ni, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range ni.Node().Spec.Taints {
				got = append(got, x.ToString())
			}
			slices.Sort(got)
			if !slices.Equal(got, c.wantTemplate) {
				t.Errorf("template taints %v, want %v", got, c.wantTemplate)
			}
			var req []string
			for _, x := range g.(*NodeGroup).pool.Taints {
				req = append(req, x.String())
			}
			if !slices.Equal(req, c.wantRequest) {
				t.Errorf("taints the creation would ask for %v, want %v", req, c.wantRequest)
			}
			sl := ni.ResourceSlices()
			if c.driver == "" {
				if len(sl) != 0 {
					t.Errorf("a CPU size's template has slices %v", sl)
				}
				return
			}
			if len(sl) != 1 || sl[0].Spec.Driver != c.driver || len(sl[0].Spec.Devices) != 1 {
				t.Fatalf("slices %v, want one of %s with one device", sl, c.driver)
			}
			if _, ok := ni.Node().Status.Allocatable[c.extendedRemain]; ok {
				t.Errorf("the DRA template keeps %s", c.extendedRemain)
			}
		})
	}
}

func TestAvailableMachineTypesAreAllowedOfferedAndCheapestFirst(t *testing.T) {
	e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection))
	e.refresh()
	got, err := e.p.GetAvailableMachineTypes()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"s-1vcpu-2gb", "s-2vcpu-2gb", "s-2vcpu-4gb", "s-4vcpu-8gb", "m-2vcpu-16gb", "s-8vcpu-16gb", "gpu-h100x1-80gb"}
	if !slices.Equal(got, want) {
		t.Errorf("machine types %v, want %v (the AMD size is not offered in nyc1, c-* and g-* are not allowed)", got, want)
	}
	if _, err := e.p.NewNodeGroup("gpu-mi300x1-192gb", nil, nil, nil, nil); err == nil {
		t.Error("a group of a size not offered in the region: want an error")
	}
	if _, err := e.p.NewNodeGroup("c-2", nil, nil, nil, nil); err == nil {
		t.Error("a group of a size not allowed: want an error")
	}
}

func TestMachineTypesWithoutAutoprovisioning(t *testing.T) {
	e := newEnv(t, doks.Options{})
	if _, err := e.p.GetAvailableMachineTypes(); err != cloudprovider.ErrNotImplemented {
		t.Errorf("GetAvailableMachineTypes without the flag: %v", err)
	}
}

func TestCreatedPoolIsAnOwnedNodeGroupAndIsDeletedOnlyWhenOwned(t *testing.T) {
	e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection))
	hand := e.pool(doks.PoolSpec{Name: "hand", Size: "s-2vcpu-4gb", Count: 1,
		Tags: []string{TagAutoscalerEnabled, TagPrefixMinNodes + "0", TagPrefixMaxNodes + "3"}})
	e.refresh()

	planned, err := e.p.NewNodeGroup("gpu-h100x1-80gb", map[string]string{"team": "ml"}, nil,
		[]apiv1.Taint{{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if planned.Exist() || !planned.Autoprovisioned() || planned.MaxSize() != 4 || planned.MinSize() != 0 {
		t.Errorf("planned group: exist %v autoprovisioned %v bounds [%d,%d]", planned.Exist(), planned.Autoprovisioned(), planned.MinSize(), planned.MaxSize())
	}
	if n, _ := planned.TargetSize(); n != 0 {
		t.Errorf("planned target %d", n)
	}
	if err := planned.IncreaseSize(1); err == nil {
		t.Error("IncreaseSize of a group that does not exist: want an error")
	}
	ni, err := planned.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	node := ni.Node()
	if q := node.Status.Allocatable[gpu.ResourceNvidiaGPU]; q.Value() != 1 || node.Labels["team"] != "ml" ||
		node.Labels[apiv1.LabelInstanceTypeStable] != "gpu-h100x1-80gb" || len(node.Spec.Taints) != 2 {
		t.Errorf("template from the size: labels %v allocatable %v taints %v", node.Labels, node.Status.Allocatable, node.Spec.Taints)
	}

	created, err := planned.(*NodeGroup).CreateWithSize(2)
	if err != nil {
		t.Fatal(err)
	}
	if !created.Exist() || !created.Autoprovisioned() {
		t.Error("created group: want an existing, autoprovisioned group")
	}
	if n, _ := created.TargetSize(); n != 2 {
		t.Errorf("created target %d, want 2", n)
	}
	// A node group at once, before the next Refresh lists it.
	if !slices.ContainsFunc(e.p.NodeGroups(), func(g cloudprovider.NodeGroup) bool { return g.Id() == created.Id() }) {
		t.Error("the created pool is not a node group before the next Refresh")
	}
	sp := e.simPool(created.Id())
	// The taint asked for, and the GPU taint DOKS adds to a GPU pool.
	if sp.AutoScale || !strings.HasPrefix(sp.Name, "ca-gpu-h100x1-80gb-") || sp.Labels["team"] != "ml" || len(sp.Taints) != 2 ||
		!slices.Contains(sp.Tags, TagAutoprovisioned) || !slices.Contains(sp.Tags, TagPrefixMaxNodes+"4") || !slices.Contains(sp.Tags, TagPrefixMinNodes+"0") {
		t.Errorf("created pool %+v", sp)
	}
	// In auto_scale mode too, the created pool stays a node group after a
	// Refresh, by its tags; the hand-made one (tags but no ownership, auto_scale off) is not.
	e.refresh()
	g := e.group(created.Id())
	if g == nil || g.MaxSize() != 4 || !g.Autoprovisioned() {
		t.Fatalf("after refresh: %v", g)
	}
	if slices.ContainsFunc(e.p.NodeGroups(), func(g cloudprovider.NodeGroup) bool { return g.Id() == hand.ID }) {
		t.Error("a hand-made pool with auto_scale off is a node group in auto_scale mode")
	}
	if e.sim.RequestCount(doks.OpGetNodePoolTemplate) == 0 {
		t.Error("the created pool's real template was not fetched for comparison")
	}

	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(e.sim.ListedPools(), func(p godo.KubernetesNodePool) bool { return p.ID == created.Id() }) {
		t.Error("the pool is still listed after Delete")
	}
	if slices.ContainsFunc(e.p.NodeGroups(), func(g cloudprovider.NodeGroup) bool { return g.Id() == created.Id() }) {
		t.Error("the deleted pool is still a node group")
	}
}

func TestCreationRefusedAtTheDropletLimit(t *testing.T) {
	e := newEnv(t, doks.Options{DropletLimit: 2}, withAutoprovisioning(napSection))
	e.pool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1})
	e.refresh()
	planned, err := e.p.NewNodeGroup("s-8vcpu-16gb", nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = planned.(*NodeGroup).CreateWithSize(2)
	endsWithError(t, err, doks.DropletLimitMessage)
	if got := e.sim.RequestCount(doks.OpCreateNodePool); got != 1 {
		t.Errorf("%d creation requests, want 1 (a refused POST is not retried)", got)
	}
}

func TestNewPoolsCarryNoLabelsInDOKSNamespaces(t *testing.T) {
	e := newEnv(t, doks.Options{}, withAutoprovisioning(napSection))
	e.refresh()
	plain, err := e.p.NewNodeGroup("s-2vcpu-4gb", map[string]string{"team": "ml"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	asked, err := e.p.NewNodeGroup("s-2vcpu-4gb", map[string]string{"team": "ml", "doks.digitalocean.com/node-pool": "mine"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if asked.Id() != plain.Id() {
		t.Errorf("planned %s, want the pool planned without the DOKS label (%s)", asked.Id(), plain.Id())
	}
	ni, err := asked.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if v := ni.Node().Labels["doks.digitalocean.com/node-pool"]; v == "mine" {
		t.Errorf("the template carries the DOKS label a pool was asked for: %v", ni.Node().Labels)
	}
}
