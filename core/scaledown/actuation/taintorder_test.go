package actuation

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// A loop that starts a batch of empty nodes soft-taints the other unneeded
// nodes after it (scaledown.RunOnce). The batch's ToBeDeleted taints must
// all be written before the first soft taint: on a client limited by
// --kube-client-qps, a soft taint sent first takes a token the batch's
// taints wait for, and every node of the batch is deleted that much later.
func TestDeleteEmptyTaintsBeforeTheLoopSoftTaints(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 8)
	kube := sdtest.NewKube(c.Objects()...)
	var (
		mu     sync.Mutex
		writes []string // "hard g1-n0", "soft g1-n5", in the order they reach the API server
	)
	kube.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		n := action.(k8stesting.UpdateAction).GetObject().(*apiv1.Node)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case clusterstate.HasToBeDeletedTaint(n):
			writes = append(writes, "hard "+n.Name)
		case hasTaint(n, clusterstate.DeletionCandidateTaint):
			writes = append(writes, "soft "+n.Name)
		}
		return false, nil, nil
	})
	opts := sdtest.Options()
	opts.NodeDeleteDelayAfterTaint = time.Hour // the batch stays in its delay: only its taints are looked at
	opts.MaxBulkSoftTaintCount = 10
	opts.MaxBulkSoftTaintTime = time.Hour
	a := New(opts, Deps{Kube: kube, Provider: c.Provider, Outcomes: &sdtest.Outcomes{},
		DrainOptions: sdtest.DrainOptions(opts), Removals: deletiontracker.New(func(string, string, deletiontracker.Outcome) {}),
		PDBs: func() ([]*policyv1.PodDisruptionBudget, error) { return nil, nil },
	}) // asynchronous, as in the autoscaler
	ctx, cancel := context.WithCancel(context.Background())
	defer a.Wait()
	defer cancel()

	var batch []*scaledown.UnneededNode
	for _, n := range []string{"g1-n0", "g1-n1", "g1-n2", "g1-n3", "g1-n4"} {
		batch = append(batch, planned(c, n))
	}
	a.DeleteEmpty(ctx, batch)
	a.SoftTaint(ctx, []*apiv1.Node{c.Node("g1-n5"), c.Node("g1-n6"), c.Node("g1-n7")}, nil)

	mu.Lock()
	got := slices.Clone(writes)
	mu.Unlock()
	firstSoft := slices.IndexFunc(got, func(w string) bool { return w[:4] == "soft" })
	hard := 0
	for i, w := range got {
		if w[:4] == "hard" {
			hard++
			if firstSoft >= 0 && i > firstSoft {
				t.Errorf("%s written after a soft taint; writes: %v", w, got)
			}
		}
	}
	if hard != len(batch) || firstSoft < 0 {
		t.Errorf("writes = %v, want the batch's 5 ToBeDeleted taints, then the soft taints", got)
	}
}
