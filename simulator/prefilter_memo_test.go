package simulator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// TestPreFilterMemoAnswersAsTheFramework places random pods of a few
// equivalence classes (plain, host port, node selector, anti-affinity,
// topology spread) one after another on two copies of a random cluster,
// with the shared PreFilter outcome on one and the framework's own on the
// other, and requires the same node or the same refusal for every pod.
// Between pods it sometimes adds a pod whose required anti-affinity repels
// one of the classes: a class whose outcome was shared before must then be
// refused where that pod runs.
func TestPreFilterMemoAnswersAsTheFramework(t *testing.T) {
	c := testChecker(t)
	apps := []string{"web", "port", "zone", "anti", "spread"}
	shared := 0
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var nodes []*apiv1.Node
		for i := range 2 + rng.IntN(6) {
			n := Node(fmt.Sprintf("n%d", i), int64(1000+rng.IntN(4)*1000), int64(1+rng.IntN(4))*GiB)
			nodes = append(nodes, WithLabel(n, apiv1.LabelTopologyZone, []string{"a", "b"}[rng.IntN(2)]))
		}
		cpu := int64(100 + rng.IntN(6)*100)
		class := func(app string, i int) *apiv1.Pod {
			p := Pod(fmt.Sprintf("%s-%d-%d", app, seed, i), cpu, 256*MiB)
			p.Labels["app"] = app
			switch app {
			case "port":
				WithHostPort(p, 8080)
			case "zone":
				p.Spec.NodeSelector = map[string]string{apiv1.LabelTopologyZone: "a"}
			case "anti":
				WithAntiAffinity(p, apiv1.LabelHostname)
			case "spread":
				WithTopologySpread(p, apiv1.LabelTopologyZone, 1)
			}
			return p
		}
		memoed, plain := snapshotOf(t, nodes, nil), snapshotOf(t, nodes, nil)
		memo := preFilterMemo{}
		for i := range 40 {
			// Pods with required anti-affinity (guards, the anti class) are
			// rarer: once one runs, the memo no longer answers.
			r := rng.IntN(30)
			if r == 0 {
				// A pod that repels the app it is labelled with from its node.
				guard := Pod(fmt.Sprintf("guard-%d-%d", seed, i), 10, MiB)
				guard.Labels["app"] = apps[rng.IntN(3)]
				WithAntiAffinity(guard, apiv1.LabelHostname)
				node := nodes[rng.IntN(len(nodes))].Name
				guard.Spec.NodeName = node
				for _, s := range []*ClusterSnapshot{memoed, plain} {
					if err := s.AddPod(guard, node); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			app := apps[rng.IntN(3)]
			switch {
			case r == 1:
				app = "anti"
			case r < 5:
				app = "spread"
			}
			p := class(app, i)
			p.UID = types.UID(p.Name)
			start := rng.IntN(len(nodes))
			kept := memo[schedulingHash(p)]
			gotIdx, gotNode, pf, gotErr := c.fitsAnyNodeShared(memoed, p, nil, start, memo, schedulingHash(p))
			wantIdx, wantNode, _, wantErr := c.fitsAnyNode(plain, p, nil, start)
			if kept != nil && pf == kept {
				shared++
			}
			if gotIdx != wantIdx || gotNode != wantNode || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("seed %d, pod %s: with the memo %d %q %v, the framework %d %q %v", seed, p.Name, gotIdx, gotNode, gotErr, wantIdx, wantNode, wantErr)
			}
			if gotErr != nil {
				continue
			}
			for _, s := range []*ClusterSnapshot{memoed, plain} {
				if err := s.AddPod(withNodeName(p, gotNode), gotNode); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if shared < 1000 {
		t.Fatalf("%d pods placed with a shared PreFilter outcome, want at least 1,000 for the test to prove something", shared)
	}
	t.Logf("%d pods placed with a shared PreFilter outcome", shared)
}

// TestPreFilterMemoKeepsOnlyOutcomesThatReadThePod: pods with pod
// (anti-)affinity, spread constraints or a deferred resize never leave an
// outcome to share; plain pods do.
func TestPreFilterMemoKeepsOnlyOutcomesThatReadThePod(t *testing.T) {
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{WithLabel(Node("n1", 4000, 8*GiB), apiv1.LabelTopologyZone, "a")}, nil)
	deferred := Pod("deferred", 100, MiB)
	deferred.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodResizePending, Status: apiv1.ConditionTrue, Reason: apiv1.PodReasonDeferred}}
	withApp := func(p *apiv1.Pod) *apiv1.Pod { p.Labels["app"] = "x"; return p }
	for _, tc := range []struct {
		pod  *apiv1.Pod
		kept bool
	}{
		{Pod("plain", 100, MiB), true},
		{WithHostPort(Pod("port", 100, MiB), 80), true},
		{WithAntiAffinity(withApp(Pod("anti", 100, MiB)), apiv1.LabelHostname), false},
		{WithTopologySpread(withApp(Pod("spread", 100, MiB)), apiv1.LabelTopologyZone, 1), false},
		{deferred, false},
	} {
		memo := preFilterMemo{}
		if _, perr := c.preFilterShared(s, tc.pod, memo, 1); perr != nil {
			t.Fatalf("%s: %v", tc.pod.Name, perr)
		}
		if kept := len(memo) == 1; kept != tc.kept {
			t.Errorf("%s: outcome kept = %v, want %v", tc.pod.Name, kept, tc.kept)
		}
	}
}
