package planner

import (
	"slices"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// newPlanner returns a planner of c under opts, its registry updated at T0.
func newPlanner(t *testing.T, c *sdtest.Cluster, opts config.AutoscalingOptions) *Planner {
	t.Helper()
	return New(opts, c.Provider, c.Registry(t, opts, sdtest.T0), sdtest.Checker(t), sdtest.DrainOptions(opts))
}

// update runs one Update of p on c at now.
func update(t *testing.T, p *Planner, c *sdtest.Cluster, opts config.AutoscalingOptions, now time.Time) {
	t.Helper()
	if err := p.Update(c.Input(t, opts, now, nil)); err != nil {
		t.Fatal(err)
	}
}

func unneededNames(p *Planner) []string {
	var out []string
	for _, u := range p.Unneeded() {
		out = append(out, u.Node.Name)
	}
	slices.Sort(out)
	return out
}

// TestUpdate checks which nodes the planner finds unneeded, and the reason
// it records for a node it keeps.
func TestUpdate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *sdtest.Cluster, light *apiv1.Pod)
		opts   func(*config.AutoscalingOptions)
		want   []string
		// kept is a node not unneeded, for the reason.
		kept   string
		reason simulator.UnremovableReason
	}{
		{name: "the light and the empty node", want: []string{"g1-n1", "g1-n2"},
			kept: "g1-n0", reason: simulator.NotUnderutilized},
		{name: "controller gone", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) { light.OwnerReferences[0].Name = "gone-rs" },
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "fewer replicas than --min-replica-count", opts: func(o *config.AutoscalingOptions) { o.MinReplicaCount = 5 },
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "safe-to-evict=false", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) {
			light.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
		}, want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "PDB allows no disruption", modify: func(c *sdtest.Cluster, _ *apiv1.Pod) { c.PDB("default", "light", 0) },
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "bare pod", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) { light.OwnerReferences = nil },
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "bare pod at the default priority, not expendable", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) {
			light.OwnerReferences, light.Spec.Priority = nil, ptr.To[int32](0)
		}, want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "local storage", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) {
			light.Spec.Volumes = []apiv1.Volume{{Name: "scratch", VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{}}}}
		}, want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		{name: "no room elsewhere", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) {
			light.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = *resource.NewMilliQuantity(900, resource.DecimalSI)
		}, want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.NoPlaceToMovePods},
		{name: "young kube-system pod without a PDB", modify: func(_ *sdtest.Cluster, light *apiv1.Pod) {
			light.Namespace = metav1.NamespaceSystem
			light.CreationTimestamp = metav1.NewTime(sdtest.T0.Add(-time.Minute))
		},
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.BlockedByPod},
		// --skip-nodes-with-system-pods: a PDB makes a kube-system pod movable.
		{name: "kube-system pod with a PDB", modify: func(c *sdtest.Cluster, light *apiv1.Pod) {
			light.Namespace = metav1.NamespaceSystem
			c.PDB(metav1.NamespaceSystem, "light", 1)
		}, want: []string{"g1-n1", "g1-n2"}},
		{name: "utilization under a lower threshold", opts: func(o *config.AutoscalingOptions) { o.NodeGroupDefaults.ScaleDownUtilizationThreshold = 0.05 },
			want: []string{"g1-n2"}, kept: "g1-n1", reason: simulator.NotUnderutilized},
		{name: "scale-down-disabled annotation", modify: func(c *sdtest.Cluster, _ *apiv1.Pod) {
			c.Node("g1-n2").Annotations = map[string]string{scaledown.ScaleDownDisabledAnnotation: "true"}
		}, want: []string{"g1-n1"}, kept: "g1-n2", reason: simulator.ScaleDownDisabledAnnotation},
		{name: "Karpenter's do-not-disrupt on the node, an alias", modify: func(c *sdtest.Cluster, _ *apiv1.Pod) {
			c.Node("g1-n2").Annotations = map[string]string{drain.DoNotDisruptKey: "true"}
		}, want: []string{"g1-n1"}, kept: "g1-n2", reason: simulator.ScaleDownDisabledAnnotation},
		{name: "tainted for deletion by someone else", modify: func(c *sdtest.Cluster, _ *apiv1.Pod) {
			c.Node("g1-n2").Spec.Taints = []apiv1.Taint{{Key: clusterstate.ToBeDeletedTaint, Value: "1", Effect: apiv1.TaintEffectNoSchedule}}
		}, want: []string{"g1-n1"}, kept: "g1-n2", reason: simulator.CurrentlyBeingDeleted},
		{name: "unready and --scale-down-unready-enabled=false", modify: func(c *sdtest.Cluster, _ *apiv1.Pod) {
			test.SetNodeReady(c.Node("g1-n2"), false, sdtest.T0.Add(-time.Hour))
		}, opts: func(o *config.AutoscalingOptions) { o.ScaleDownUnreadyEnabled = false },
			want: []string{"g1-n1"}, kept: "g1-n2", reason: simulator.ScaleDownUnreadyDisabled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, light := sdtest.ThreeNodes()
			if tc.modify != nil {
				tc.modify(c, light)
			}
			opts := sdtest.Options()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			p := newPlanner(t, c, opts)
			update(t, p, c, opts, sdtest.T0)
			if got := unneededNames(p); !slices.Equal(got, tc.want) {
				t.Fatalf("unneeded = %v, want %v", got, tc.want)
			}
			if tc.kept == "" {
				return
			}
			if got := p.unremovable.current[tc.kept].reason; got != tc.reason {
				t.Errorf("%s kept for %v, want %v", tc.kept, got, tc.reason)
			}
		})
	}
}

// A group at its min size offers no candidate.
func TestUpdateGroupAtMinSize(t *testing.T) {
	c := sdtest.NewCluster("g1", 2, 2)
	opts := sdtest.Options()
	p := newPlanner(t, c, opts)
	update(t, p, c, opts, sdtest.T0)
	if got := unneededNames(p); len(got) != 0 {
		t.Fatalf("unneeded = %v, want none", got)
	}
	if got := p.unremovable.current["g1-n0"].reason; got != simulator.NodeGroupMinSizeReached {
		t.Errorf("reason = %v, want NodeGroupMinSizeReached", got)
	}
}

// An unready node is unneeded as unready: choose then waits
// --scale-down-unready-time for it.
func TestUnreadyNodeIsUnneededAsUnready(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 3)
	c.Pod("fill-0", 1500, "fill-rs", "g1-n0")
	c.Pod("fill-1", 1500, "fill-rs", "g1-n1")
	test.SetNodeReady(c.Node("g1-n2"), false, sdtest.T0.Add(-time.Hour))
	opts := sdtest.Options()
	p := newPlanner(t, c, opts)
	update(t, p, c, opts, sdtest.T0)
	un := p.Unneeded()
	if len(un) != 1 || un[0].Node.Name != "g1-n2" || !un[0].Unready {
		t.Fatalf("unneeded = %v, want g1-n2, unready", unneededNames(p))
	}
}

// Nodes found unneeded spend the PDB disruptions their evictions need: n1
// and n2 each hold one pod of a PDB that allows a single disruption, so
// only one of them is unneeded.
func TestUnneededNodesShareOnePDBBudget(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 3)
	c.Pod("busy", 1000, "rs-busy", "g1-n0")
	for _, n := range []string{"g1-n1", "g1-n2"} {
		c.Pod("web-"+n, 200, "rs-web", n).Labels = map[string]string{"app": "web"}
	}
	c.PDB("default", "web", 1)
	opts := sdtest.Options()
	p := newPlanner(t, c, opts)
	update(t, p, c, opts, sdtest.T0)
	if got := unneededNames(p); !slices.Equal(got, []string{"g1-n1"}) {
		t.Fatalf("unneeded = %v, want only g1-n1 (the PDB allows one eviction)", got)
	}
}

// A GPU node is judged by its GPU use against
// --scale-down-gpu-utilization-threshold, not by cpu or memory.
func TestGPUNodeJudgedByGPUUtilization(t *testing.T) {
	const gpu = apiv1.ResourceName("nvidia.com/gpu")
	cases := []struct {
		name      string
		threshold float64
		want      []string
	}{
		{name: "a quarter of its GPUs used, under 0.5", threshold: 0.5, want: []string{"gpu-n1"}},
		{name: "a quarter of its GPUs used, over 0.2", threshold: 0.2, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("gpu", 0, 2)
			for _, n := range c.Nodes {
				n.Status.Capacity[gpu] = *resource.NewQuantity(4, resource.DecimalSI)
				n.Status.Allocatable[gpu] = *resource.NewQuantity(4, resource.DecimalSI)
				c.Provider.SetGpuConfig(n.Name, &cloudprovider.GpuConfig{Type: "nvidia", ExtendedResourceName: gpu})
			}
			// n0 has half its GPUs in use; n1 a quarter, with most of its
			// cpu (0.75: busy by cpu), and its pod fits n0.
			c.Pod("half", 100, "rs-half", "gpu-n0").Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(2, resource.DecimalSI)
			c.Pod("quarter", 1500, "rs-quarter", "gpu-n1").Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(1, resource.DecimalSI)
			opts := sdtest.Options()
			opts.NodeGroupDefaults.ScaleDownGpuUtilizationThreshold = tc.threshold
			p := newPlanner(t, c, opts)
			update(t, p, c, opts, sdtest.T0)
			if got := unneededNames(p); !slices.Equal(got, tc.want) {
				t.Fatalf("unneeded = %v, want %v", got, tc.want)
			}
		})
	}
}

// The candidate budget bounds the non-empty nodes simulated and found per
// loop; nodes already unneeded are checked again without using it, so in an
// idle cluster every unneeded node ends up tracked. n1..n9 can all go.
func TestCandidateBudget(t *testing.T) {
	cases := []struct {
		name             string
		nonEmptyCount    int
		poolRatio        float64
		poolMin          int
		unneededEachLoop []int
	}{
		{name: "--scale-down-non-empty-candidates-count=2 more each loop", nonEmptyCount: 2, poolRatio: 0, poolMin: 3,
			unneededEachLoop: []int{2, 4, 6, 8, 9, 9}},
		{name: "a pool of ceil(10 × 0.3) nodes simulated each loop", nonEmptyCount: 0, poolRatio: 0.3, poolMin: 1,
			unneededEachLoop: []int{3, 6, 9}},
		// 0 or less is no limit, as upstream's help says.
		{name: "--scale-down-non-empty-candidates-count=0 is no limit", nonEmptyCount: 0, poolRatio: 0.1, poolMin: 50,
			unneededEachLoop: []int{9}},
		{name: "--scale-down-non-empty-candidates-count=-1 is no limit", nonEmptyCount: -1, poolRatio: 0.1, poolMin: 50,
			unneededEachLoop: []int{9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.LightNodes(9)
			opts := sdtest.Options()
			opts.ScaleDownNonEmptyCandidatesCount = tc.nonEmptyCount
			opts.ScaleDownCandidatesPoolRatio = tc.poolRatio
			opts.ScaleDownCandidatesPoolMinCount = tc.poolMin
			p := newPlanner(t, c, opts)
			var got []int
			for i := range tc.unneededEachLoop {
				update(t, p, c, opts, sdtest.T0.Add(time.Duration(i)*time.Second))
				got = append(got, len(p.Unneeded()))
			}
			if !slices.Equal(got, tc.unneededEachLoop) {
				t.Fatalf("unneeded nodes after each loop = %v, want %v", got, tc.unneededEachLoop)
			}
			// The first ones found keep their time.
			since := sdtest.T0.Add(time.Hour)
			for _, u := range p.Unneeded() {
				if u.Since.Before(since) {
					since = u.Since
				}
			}
			if !since.Equal(sdtest.T0) {
				t.Errorf("earliest unneeded since %v, want %v", since, sdtest.T0)
			}
		})
	}
}

// --blocking-system-pod-distruption-timeout: a kube-system pod without a
// PDB keeps its node only until it is older than the timeout; from then
// the node is unneeded.
func TestSystemPodBlocksOnlyUntilTimeout(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 2)
	c.Pod("fill", 1000, "fill-rs", "g1-n0")
	dns := c.Pod("dns", 200, "rs-dns", "g1-n1")
	dns.Namespace = metav1.NamespaceSystem
	dns.CreationTimestamp = metav1.NewTime(sdtest.T0.Add(-10 * time.Minute))
	opts := sdtest.Options()
	opts.BspDisruptionTimeout = 20 * time.Minute
	p := newPlanner(t, c, opts)
	for _, at := range []time.Duration{0, 9 * time.Minute} { // 10m, 19m old
		update(t, p, c, opts, sdtest.T0.Add(at))
		if got := unneededNames(p); len(got) != 0 {
			t.Fatalf("unneeded at +%s = %v while its kube-system pod is younger than the timeout", at, got)
		}
	}
	update(t, p, c, opts, sdtest.T0.Add(11*time.Minute)) // 21m old
	if un := p.Unneeded(); len(un) != 1 || un[0].Node.Name != "g1-n1" || !un[0].Since.Equal(sdtest.T0.Add(11*time.Minute)) {
		t.Fatalf("unneeded = %v, want g1-n1 since the pod passed the timeout", unneededNames(p))
	}
}
