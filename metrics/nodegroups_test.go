package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClusterStateMetricsUpstreamNames(t *testing.T) {
	reg := newRegistry(t, false)
	before := testutil.ToFloat64(oldUnregisteredNodesRemoved)
	RegisterFailedNodeCreations(FailedScaleUpTimeout, 5)
	RegisterFailedNodeCreations(FailedScaleUpTimeout, 0)
	RegisterOldUnregisteredNodesRemoved(2)
	fams := gather(t, reg)
	p := "cluster_autoscaler_"
	mustValue(t, fams, p+"failed_node_creations_total", map[string]string{"reason": "timeout"}, 5)
	mustValue(t, fams, p+"old_unregistered_nodes_removed_count", map[string]string{}, before+2)
	for _, n := range []string{"node_group_healthiness", "node_group_backoff_status"} {
		if _, ok := fams[p+n]; ok {
			t.Errorf("%s%s exposed without emitPerNodeGroupMetrics", p, n)
		}
	}
}

func TestNodeGroupHealthAndBackoff(t *testing.T) {
	reg := newRegistry(t, true)
	clear(nodeGroupBackoffStatus.last)
	p := "cluster_autoscaler_"
	UpdateNodeGroupHealth("pool-1", true, false, "timeout")
	fams := gather(t, reg)
	mustValue(t, fams, p+"node_group_healthiness", map[string]string{"node_group": "pool-1"}, 1)
	mustValue(t, fams, p+"node_group_backoff_status", map[string]string{"node_group": "pool-1", "reason": ""}, 0)

	UpdateNodeGroupHealth("pool-1", false, true, "timeout")
	fams = gather(t, reg)
	mustValue(t, fams, p+"node_group_healthiness", map[string]string{"node_group": "pool-1"}, 0)
	mustValue(t, fams, p+"node_group_backoff_status", map[string]string{"node_group": "pool-1", "reason": "timeout"}, 1)
	if _, ok := value(fams, p+"node_group_backoff_status", map[string]string{"node_group": "pool-1", "reason": ""}); ok {
		t.Error("the not-backed-off series stays beside the backoff's")
	}

	UpdateNodeGroupHealth("pool-1", true, false, "")
	fams = gather(t, reg)
	if _, ok := value(fams, p+"node_group_backoff_status", map[string]string{"node_group": "pool-1", "reason": "timeout"}); ok {
		t.Error("the ended backoff's series is still exposed")
	}
	DeleteNodeGroupMetrics("pool-1")
	fams = gather(t, reg)
	if _, ok := fams[p+"node_group_backoff_status"]; ok {
		t.Error("series of a deleted group still exposed")
	}
}
