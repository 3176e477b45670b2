package report

import (
	"errors"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/giveup"
)

// A give-up of a scale-up whose nodes never registered tells the timeout
// and each instance removed, or the removal's failure, and counts them.
func TestGiveUps(t *testing.T) {
	cases := []struct {
		name      string
		deleteErr error
		want      []string
		removed   float64
	}{
		{"instances deleted", nil, []string{
			"Warning ScaleUpTimedOut Nodes added to group g1 failed to register within 15m0s",
			"Normal DeleteUnregistered Removed unregistered node digitalocean://1",
		}, 1},
		{"deletion refused", errors.New("404"), []string{
			"Warning ScaleUpTimedOut Nodes added to group g1 failed to register within 15m0s",
			"Warning DeleteUnregisteredFailed Failed to remove node digitalocean://1: 404",
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, map[string]int{"g1": 10})
			removedBefore, _ := f.value(t, "old_unregistered_nodes_removed_count", nil)
			timeoutsBefore, _ := f.value(t, "failed_node_creations_total", map[string]string{"reason": "timeout"})
			failedBefore, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "timeout"})
			p := clusterstate.GiveUpPlan{GroupID: "g1", Group: f.p.Group("g1"), Decrease: 2, Reason: clusterstate.GiveUpTimeout,
				TimedOutAfter: 15 * time.Minute, Instances: []cloudprovider.Instance{{Id: "digitalocean://1"},
					// failed to create: no DeleteUnregistered event, as upstream
					{Id: "digitalocean://2", Status: &cloudprovider.InstanceStatus{ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorCode: "x"}}}}}
			f.r.GiveUps([]giveup.Outcome{{Plan: p, Decreased: 2, DeleteErr: c.deleteErr}}, t0)
			wantEvents(t, f.drain(), c.want...)
			if v, _ := f.value(t, "old_unregistered_nodes_removed_count", nil); v != removedBefore+c.removed {
				t.Errorf("old_unregistered_nodes_removed_count rose by %v, want %v", v-removedBefore, c.removed)
			}
			if v, _ := f.value(t, "failed_node_creations_total", map[string]string{"reason": "timeout"}); v != timeoutsBefore+2 {
				t.Errorf("failed_node_creations_total{timeout} rose by %v, want 2", v-timeoutsBefore)
			}
			if v, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "timeout"}); v != failedBefore+1 {
				t.Errorf("failed_scale_ups_total{timeout} rose by %v, want 1", v-failedBefore)
			}
		})
	}
}

// Asking again to delete given-up instances is no new failed scale-up.
func TestGiveUpRetryIsNoNewFailure(t *testing.T) {
	f := newFixture(t, map[string]int{"g1": 10})
	before, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "timeout"})
	p := clusterstate.GiveUpPlan{GroupID: "g1", Group: f.p.Group("g1"), Retry: true, Reason: clusterstate.GiveUpTimeout,
		Instances: []cloudprovider.Instance{{Id: "digitalocean://1"}}}
	f.r.GiveUps([]giveup.Outcome{{Plan: p}}, t0)
	wantEvents(t, f.drain(), "Normal DeleteUnregistered Removed unregistered node digitalocean://1")
	if v, _ := f.value(t, "failed_scale_ups_total", map[string]string{"reason": "timeout"}); v != before {
		t.Errorf("failed_scale_ups_total{timeout} rose by %v on a retry, want 0", v-before)
	}
}
