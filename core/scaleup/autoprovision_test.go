package scaleup

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func toleration(key string, op apiv1.TolerationOperator, value string, effect apiv1.TaintEffect) apiv1.Toleration {
	return apiv1.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
}

// A pool's workload-separation taint comes only from a pod that both
// selects key=value and tolerates exactly key=value:NoSchedule (GKE's
// rule), so the pod always tolerates it.
func TestSeparationTaints(t *testing.T) {
	ml := apiv1.Taint{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}
	cases := []struct {
		name        string
		selector    map[string]string
		tolerations []apiv1.Toleration
		want        []apiv1.Taint
	}{
		{"selects and tolerates key=value:NoSchedule", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectNoSchedule)}, []apiv1.Taint{ml}},
		{"operator and effect left empty (Equal, every effect)", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", "", "ml", "")}, []apiv1.Taint{ml}},
		{"tolerates without selecting", nil,
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectNoSchedule)}, nil},
		{"selects without tolerating", map[string]string{"dedicated": "ml"}, nil, nil},
		{"another value tolerated", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "web", apiv1.TaintEffectNoSchedule)}, nil},
		{"operator Exists on the key", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpExists, "", "")}, nil},
		{"tolerates everything", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("", apiv1.TolerationOpExists, "", "")}, nil},
		{"NoExecute only: a NoSchedule taint would not be tolerated", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectNoExecute)}, nil},
		{"PreferNoSchedule only", map[string]string{"dedicated": "ml"},
			[]apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectPreferNoSchedule)}, nil},
		{"Kubernetes' namespace", map[string]string{"node.kubernetes.io/role": "x"},
			[]apiv1.Toleration{toleration("node.kubernetes.io/role", apiv1.TolerationOpEqual, "x", apiv1.TaintEffectNoSchedule)}, nil},
		{"two keys, sorted, each once", map[string]string{"team": "a", "dedicated": "ml"},
			[]apiv1.Toleration{
				toleration("team", apiv1.TolerationOpEqual, "a", ""),
				toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectNoSchedule),
				toleration("team", apiv1.TolerationOpEqual, "a", apiv1.TaintEffectNoSchedule),
			},
			[]apiv1.Taint{ml, {Key: "team", Value: "a", Effect: apiv1.TaintEffectNoSchedule}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := test.BuildPendingPod("p", 100, test.MiB, "rs")
			p.Spec.NodeSelector = c.selector
			p.Spec.Tolerations = c.tolerations
			if got := separationTaints(p, requiredLabels(p)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("separationTaints = %v, want %v", got, c.want)
			}
		})
	}
}

// machine is a machine type of the autoprovisioning tests: its nodes'
// resources, GPUs (count, DRA driver, model), and price per hour.
type machine struct {
	name     string
	milliCPU int64
	memMiB   int64 // 64 GiB when 0
	gpus     int
	driver   string
	price    float64
}

// template is a template of the machine as the DigitalOcean provider
// predicts one in DRA mode: the slice its vendor's driver publishes
// (gpudriver.Slice) and the GPU taint DOKS puts on GPU pools.
func (m machine) template() *framework.NodeInfo {
	mem := int64(64 * test.GiB)
	if m.memMiB > 0 {
		mem = m.memMiB << 20
	}
	ni := test.BuildTemplate(m.name, m.milliCPU, mem, nil)
	if m.gpus > 0 {
		model := "nvidia_h100"
		key := "nvidia.com/gpu"
		if m.driver == gpudriver.AMD {
			model, key = "amd_mi300x", "amd.com/gpu"
		}
		ni.Node().Spec.Taints = []apiv1.Taint{{Key: key, Effect: apiv1.TaintEffectNoSchedule}}
		ni.SetResourceSlices([]*resourceapi.ResourceSlice{gpudriver.Slice(ni.Node().Name, m.driver, model, m.gpus)})
	}
	return ni
}

// newGroupPlan plans a scale-up for pods with autoprovisioning on, no
// existing group, and the machines offered, in a cluster whose DRA objects
// are claims and both GPU drivers' DeviceClasses.
func newGroupPlan(t *testing.T, machines []machine, pods []*apiv1.Pod, claims ...*resourceapi.ResourceClaim) *Plan {
	t.Helper()
	return newGroupPlanOf(t, test.NewProvider(), machines, pods, claims...)
}

// newGroupPlanOf is newGroupPlan with the given provider.
func newGroupPlanOf(t *testing.T, p *test.Provider, machines []machine, pods []*apiv1.Pod, claims ...*resourceapi.ResourceClaim) *Plan {
	t.Helper()
	o, in := newGroupScaleUp(t, p, machines, pods, claims...)
	return o.computePlan(in)
}

// newGroupScaleUp returns an orchestrator with autoprovisioning on, no
// existing group and the machines offered, and the input of a scale-up for
// pods in a cluster whose DRA objects are claims and both GPU drivers'
// DeviceClasses.
func newGroupScaleUp(t *testing.T, p *test.Provider, machines []machine, pods []*apiv1.Pod, claims ...*resourceapi.ResourceClaim) (*Orchestrator, Input) {
	t.Helper()
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	prices := map[string]float64{}
	for _, m := range machines {
		p.AddMachineType(m.name, m.template())
		prices[m.name+"-template"] = m.price
	}
	p.SetPricing(&test.PricingModel{NodePrices: prices})
	opts := config.Defaults()
	opts.NodeAutoprovisioningEnabled = true
	now := time.Now()
	registry := clusterstate.NewRegistry(p, opts)
	if err := registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	snap := simulator.NewClusterSnapshot()
	classes := []*resourceapi.DeviceClass{gpudriver.DeviceClass(gpudriver.NVIDIA), gpudriver.DeviceClass(gpudriver.AMD)}
	if err := snap.SetDRA(dra.NewSnapshot(nil, claims, classes)); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		pod.UID = types.UID(pod.Name)
	}
	o := New(opts, p, registry, expander.NewChain(nil, nil), checker, &countingRecorder{})
	return o, Input{Snapshot: snap, Pods: pods, Templates: map[string]*framework.NodeInfo{}, Now: now,
		Quotas: resourcequotas.NewTracker(resourcequotas.Limits{}, nil, nil)}
}

// gpuPod is a pending pod tolerating both vendors' GPU taints, as GPU pods
// on DOKS must; with claim it uses that ResourceClaim.
func gpuPod(name, claim string) *apiv1.Pod {
	p := test.BuildPendingPod(name, 1000, test.GiB, "rs-"+name)
	p.Spec.Tolerations = []apiv1.Toleration{
		toleration("nvidia.com/gpu", apiv1.TolerationOpExists, "", apiv1.TaintEffectNoSchedule),
		toleration("amd.com/gpu", apiv1.TolerationOpExists, "", apiv1.TaintEffectNoSchedule),
	}
	if claim != "" {
		WithClaim(p, claim)
	}
	return p
}

// A pod claiming a GPU of one vendor gets a new pool of the cheapest size
// whose predicted devices satisfy its claim: an NVIDIA size for an NVIDIA
// claim, an AMD size for an AMD claim though an NVIDIA size is cheaper,
// the 8-GPU size for 8 GPUs (a claim is allocated on one node). A pod
// asking for no GPU never gets a GPU size, even one cheaper and tolerated.
func TestNewPoolForAClaimIsItsVendorsCheapestFittingSize(t *testing.T) {
	machines := []machine{
		{name: "cpu", milliCPU: 4000, price: 0.5},
		{name: "amd-x1", milliCPU: 8000, gpus: 1, driver: gpudriver.AMD, price: 0.4},
		{name: "nvidia-x1", milliCPU: 8000, gpus: 1, driver: gpudriver.NVIDIA, price: 0.3},
		{name: "nvidia-x8", milliCPU: 64000, gpus: 8, driver: gpudriver.NVIDIA, price: 24},
		{name: "nvidia-big-x1", milliCPU: 64000, gpus: 1, driver: gpudriver.NVIDIA, price: 2},
	}
	cases := []struct {
		name  string
		pod   *apiv1.Pod
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{"one NVIDIA GPU", gpuPod("n1", "n1"), Claim("n1", gpudriver.NVIDIA, 1), "nvidia-x1"},
		{"one AMD GPU", gpuPod("a1", "a1"), Claim("a1", gpudriver.AMD, 1), "amd-x1"},
		{"eight NVIDIA GPUs", gpuPod("n8", "n8"), Claim("n8", gpudriver.NVIDIA, 8), "nvidia-x8"},
		{"no GPU, though GPU taints are tolerated", gpuPod("plain", ""), nil, "cpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var claims []*resourceapi.ResourceClaim
			if c.claim != nil {
				claims = append(claims, c.claim)
			}
			plan := newGroupPlan(t, machines, []*apiv1.Pod{c.pod}, claims...)
			if len(plan.Options) != 1 {
				t.Fatalf("options %d, want the one new group; not helped: %v", len(plan.Options), plan.NotHelped)
			}
			opt := plan.Options[0]
			if id := opt.NodeGroup.Id(); id != c.want || opt.NodeGroup.Exist() || opt.NodeCount != 1 {
				t.Errorf("new group %s (exists %v) +%d, want %s +1", id, opt.NodeGroup.Exist(), opt.NodeCount, c.want)
			}
		})
	}
}

// A GPU pod that does not tolerate the GPU taint DOKS puts on GPU pools
// gets no GPU pool it could not run on: no allowed size fits it.
func TestNoNewGPUPoolForAPodNotToleratingItsTaint(t *testing.T) {
	machines := []machine{{name: "nvidia-x1", milliCPU: 8000, gpus: 1, driver: gpudriver.NVIDIA, price: 0.3}}
	pod := WithClaim(test.BuildPendingPod("n1", 1000, test.GiB, "rs-n1"), "n1")
	plan := newGroupPlan(t, machines, []*apiv1.Pod{pod}, Claim("n1", gpudriver.NVIDIA, 1))
	if len(plan.Options) != 0 || len(plan.NotHelped) != 1 || plan.NotHelped[0].Reasons[ReasonNoAllowedSizeFits] != 1 {
		t.Fatalf("options %d, not helped %v: want none, and the pod told no allowed size fits", len(plan.Options), plan.NotHelped)
	}
}

// A pod that selects dedicated=ml and tolerates dedicated=ml:NoSchedule is
// planned a new group asked for that label and that taint, whose nodes
// carry both; a pod that only selects the label gets the label alone.
func TestNewPoolForASeparatedWorkloadCarriesItsTaint(t *testing.T) {
	cpu := []machine{{name: "cpu", milliCPU: 4000, price: 0.5}}
	ml := apiv1.Taint{Key: "dedicated", Value: "ml", Effect: apiv1.TaintEffectNoSchedule}
	cases := []struct {
		name        string
		tolerations []apiv1.Toleration
		want        []apiv1.Taint
	}{
		{"selects and tolerates", []apiv1.Toleration{toleration("dedicated", apiv1.TolerationOpEqual, "ml", apiv1.TaintEffectNoSchedule)}, []apiv1.Taint{ml}},
		{"selects only", nil, nil},
		{"selects and tolerates everything", []apiv1.Toleration{toleration("", apiv1.TolerationOpExists, "", "")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := test.BuildPendingPod("p", 1000, test.GiB, "rs")
			pod.Spec.NodeSelector = map[string]string{"dedicated": "ml"}
			pod.Spec.Tolerations = c.tolerations
			plan := newGroupPlan(t, cpu, []*apiv1.Pod{pod})
			if len(plan.Options) != 1 {
				t.Fatalf("options %d, want the one new group; not helped: %v", len(plan.Options), plan.NotHelped)
			}
			opt := plan.Options[0]
			g := opt.NodeGroup.(*test.PlannedGroup)
			if g.Labels["dedicated"] != "ml" || !reflect.DeepEqual(g.Taints, c.want) {
				t.Errorf("new group asked for labels %v taints %v, want dedicated=ml and %v", g.Labels, g.Taints, c.want)
			}
			if got := opt.NodeInfo.Node().Spec.Taints; !reflect.DeepEqual(got, c.want) {
				t.Errorf("the option's template node has taints %v, want %v", got, c.want)
			}
		})
	}
}

// While the provider has stopped node pool creation (it could not
// recognise the pools it would make, or one it made never showed up), no
// new group is planned and the pods are told why.
func TestNoNewPoolWhileCreationIsStopped(t *testing.T) {
	p := test.NewProvider()
	p.StopCreation("the token lacks tag:read")
	plan := newGroupPlanOf(t, p, []machine{{name: "cpu", milliCPU: 4000, price: 0.5}},
		[]*apiv1.Pod{test.BuildPendingPod("p", 1000, test.GiB, "rs")})
	if len(plan.Options) != 0 || len(plan.NotHelped) != 1 || plan.NotHelped[0].Reasons[ReasonCreationStopped] != 1 {
		t.Fatalf("options %d, not helped %v: want none, and the pod told creation is stopped", len(plan.Options), plan.NotHelped)
	}
}

func TestRequiredLabelsLeaveKubernetesNamespacesOut(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool // carried by a new pool
	}{
		{"team", true},
		{"example.com/team", true},
		{"kubernetes.io/arch", false},
		{"node.kubernetes.io/instance-type", false},
		{"topology.k8s.io/zone", false},
		{"k8s.io/x", false},
		// A namespace that only contains the reserved text is the operator's.
		{"kubernetes.io.example.com/team", true},
		{"notk8s.io/team", true},
		// DigitalOcean's namespaces are the provider's to refuse.
		{"doks.digitalocean.com/gpu-brand", true},
	} {
		p := &apiv1.Pod{Spec: apiv1.PodSpec{NodeSelector: map[string]string{c.key: "v"}}}
		if _, got := requiredLabels(p)[c.key]; got != c.want {
			t.Errorf("%s: carried %v, want %v", c.key, got, c.want)
		}
	}
}

// With sizes listed in the operator's order (DigitalOcean's
// autoprovisioning.size_preference), the new pool is of the first listed
// size that helps, though a later one is cheaper; without it, the cheapest.
// A listed size the pod does not fit is passed over.
func TestNewPoolFollowsTheOperatorsSizePreference(t *testing.T) {
	machines := []machine{
		{name: "small", milliCPU: 500, price: 0.1},
		{name: "nvidia-h100", milliCPU: 8000, gpus: 1, driver: gpudriver.NVIDIA, price: 3},
		{name: "nvidia-l40s", milliCPU: 8000, gpus: 1, driver: gpudriver.NVIDIA, price: 1.5},
	}
	for _, tc := range []struct {
		byPreference bool
		want         string
	}{{true, "nvidia-h100"}, {false, "nvidia-l40s"}} {
		p := test.NewProvider()
		if tc.byPreference {
			p.ListMachineTypesByPreference()
		}
		plan := newGroupPlanOf(t, p, machines, []*apiv1.Pod{gpuPod("n1", "n1")}, Claim("n1", gpudriver.NVIDIA, 1))
		if len(plan.Options) != 1 || plan.Options[0].NodeGroup.Id() != tc.want {
			t.Fatalf("by preference %v: options %v, want one new group %s", tc.byPreference, optionIDs(plan.Options), tc.want)
		}
	}
}

func optionIDs(opts []expander.Option) []string {
	var out []string
	for _, o := range opts {
		out = append(out, o.NodeGroup.Id())
	}
	return out
}

// A burst of mixed pods (issue 43's purchase-efficiency figure, with DOKS's
// allocatable and prices of three sizes) gets the size that holds them
// tightly, on whole nodes: two of the largest for the 24 pods they hold,
// the last two left pending for the next loop. Priced per pod placed, or
// with a third node bought for the last two, the smallest size looked the
// better buy for the small pods, and the large ones got pools of their own
// (1.80× the cheapest cover where 2 × s-8vcpu-16gb and an s-2vcpu-2gb for
// the last two are 1.13×).
func TestNewPoolForAMixedBurstIsBoughtOnWholeNodes(t *testing.T) {
	machines := []machine{
		{name: "s-2vcpu-2gb", milliCPU: 1900, memMiB: 1436, price: 0.02679},
		{name: "s-4vcpu-8gb", milliCPU: 3900, memMiB: 6044, price: 0.07143},
		{name: "s-8vcpu-16gb", milliCPU: 7800, memMiB: 14236, price: 0.14286},
	}
	var pods []*apiv1.Pod
	add := func(n int, name string, milliCPU, memMiB int64) {
		for i := range n {
			pods = append(pods, test.BuildPendingPod(fmt.Sprintf("%s-%d", name, i), milliCPU, memMiB<<20, name))
		}
	}
	add(16, "small", 250, 256)
	add(6, "cpu", 1500, 512)
	add(4, "mem", 500, 5120)
	p := test.NewProvider()
	o, in := newGroupScaleUp(t, p, machines, pods)
	prices := map[string]float64{}
	for _, m := range machines {
		prices[m.name+"-template"] = m.price
	}
	// Pods priced by their requests, at s-2vcpu-4gb's rate per vCPU and GiB
	// (as the DigitalOcean provider prices them against a reference size).
	p.SetPricing(&test.PricingModel{NodePrices: prices, PodPerCoreHour: 0.0357 / 2, PodPerGiBHour: 0.0357 / 4})
	plan := o.computePlan(in)
	if len(plan.Options) != 1 {
		t.Fatalf("options %v, want one new group", optionIDs(plan.Options))
	}
	got := plan.Options[0]
	if got.NodeGroup.Id() != "s-8vcpu-16gb" || got.NodeCount != 2 || len(got.Pods) != 24 {
		t.Fatalf("new group %s +%d for %d pods, want s-8vcpu-16gb +2 for 24 (the last two pods left for the next loop)",
			got.NodeGroup.Id(), got.NodeCount, len(got.Pods))
	}
}

// A new pool is not offered in the shape of a group that exists and can
// grow: its option, trimmed by its last node when that buys better
// (wholeNodes), could beat the group's untrimmed one and buy a second pool
// of one shape (the chaos run's pools beyond need). At its max the group
// cannot grow, and the new pool is offered.
func TestNoNewPoolInTheShapeOfAGroupThatCanGrow(t *testing.T) {
	small := machine{name: "s-2vcpu-2gb", milliCPU: 1900, memMiB: 1436, price: 0.02679}
	shaped := func() *framework.NodeInfo {
		ni := small.template()
		ni.Node().Labels[apiv1.LabelInstanceTypeStable] = small.name
		return ni
	}
	for _, tc := range []struct {
		name    string
		target  int
		wantNew bool
	}{
		{"the group can grow", 1, false},
		{"the group is at its max", 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := test.NewProvider()
			p.AddMachineType(small.name, shaped())
			group := shaped()
			p.AddNodeGroup("pool", 0, 8, tc.target, group)
			pods := []*apiv1.Pod{test.BuildPendingPod("big", 1800, 256<<20, "big"), test.BuildPendingPod("little", 300, 256<<20, "little")}
			o, in := newGroupScaleUp(t, p, nil, pods)
			p.SetPricing(&test.PricingModel{NodePrices: map[string]float64{small.name + "-template": small.price}})
			in.Templates["pool"] = group
			plan := o.computePlan(in)
			gotNew, gotGroup := false, false
			for _, opt := range plan.Options {
				if opt.NodeGroup.Exist() {
					gotGroup = gotGroup || opt.NodeGroup.Id() == "pool"
				} else {
					gotNew = true
				}
			}
			if gotNew != tc.wantNew || gotGroup == tc.wantNew {
				t.Errorf("options %v: a new pool offered %v, the group %v; want a new pool %v", optionIDs(plan.Options), gotNew, gotGroup, tc.wantNew)
			}
		})
	}
}
