package digitalocean

import (
	"context"

	"testing"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// A create or delete is sent once whatever the answer but a 429: an unclear
// answer (5xx, a cut connection) may hide a write that was applied, which a
// second request would repeat (a second pool) or turn into a 404.
func TestWritesThatAreNotRepeatable(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fault        doks.Fault
		wantRequests int
		wantMaybe    bool // the error says the write may have been applied
		wantApplied  bool // the simulator holds the write's effect
	}{
		{"504 after applying", doks.Fault{Status: 504, Applied: true, Times: 1}, 1, true, true},
		{"502 before applying", doks.Fault{Status: 502, Times: 1}, 1, true, false},
		{"cut connection after applying", doks.Fault{Cut: true, Applied: true, Times: 1}, 1, true, true},
		{"cut connection before applying", doks.Fault{Cut: true, Times: 1}, 1, true, false},
		{"422 refused", doks.Fault{Status: 422, Times: 1}, 1, false, false},
		{"429 is retried", doks.Fault{Status: 429, Times: 1}, 2, false, true},
	} {
		for _, op := range []string{doks.OpCreateNodePool, doks.OpDeleteNodePool, doks.OpDeleteNode} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				e := newEnv(t, doks.Options{})
				p := e.pool(doks.PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 2})
				f := tc.fault
				f.Operation = op
				e.sim.InjectFault(f)
				c, ctx := e.p.m.client, context.Background()
				var err error
				var applied bool
				switch op {
				case doks.OpCreateNodePool:
					_, err = c.createNodePool(ctx, &godo.KubernetesNodePoolCreateRequest{Name: "b", Size: "s-2vcpu-4gb", Count: 1})
					applied = len(e.sim.ListedPools()) == 2
				case doks.OpDeleteNodePool:
					err = c.deleteNodePool(ctx, p.ID)
					applied = len(e.sim.ListedPools()) == 0
				case doks.OpDeleteNode:
					err = c.deleteNode(ctx, p.ID, p.Nodes[0].ID)
					applied = nodeGone(e.sim.ListedPools(), p.Nodes[0].ID)
				}
				if got := e.sim.RequestCount(op); got != tc.wantRequests {
					t.Errorf("%d requests, want %d", got, tc.wantRequests)
				}
				if wantErr := tc.wantRequests == 1 && tc.fault.Status != 429; (err != nil) != wantErr {
					t.Errorf("error %v, want one: %v", err, wantErr)
				}
				if maybeApplied(err) != tc.wantMaybe {
					t.Errorf("maybeApplied(%v) = %v, want %v", err, maybeApplied(err), tc.wantMaybe)
				}
				if applied != tc.wantApplied {
					t.Errorf("applied %v, want %v", applied, tc.wantApplied)
				}
			})
		}
	}
}

func nodeGone(pools []godo.KubernetesNodePool, nodeID string) bool {
	for _, p := range pools {
		for _, n := range p.Nodes {
			if n.ID == nodeID && (n.Status == nil || n.Status.State != "deleting") {
				return false
			}
		}
	}
	return true
}
