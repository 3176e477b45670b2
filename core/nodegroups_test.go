package core

import (
	"reflect"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
)

// Scale-down removing every node of a group the cloud deletes in place of
// its last nodes (a DOKS pool node autoprovisioning created): the group
// counts once in deleted_node_groups_total with one DeletedNodeGroup
// event, at the removal, and the loops after it neither record it again
// nor ask to delete it again. The group beside it is untouched.
func TestGroupDeletedWithItsLastNodesRecordedOnce(t *testing.T) {
	value := scrape(t)
	before := max(0, value("deleted_node_groups_total", map[string]string{"group_type": ""}))
	p, objs := cluster(
		groupSpec{id: "base", min: 1, max: 3, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "nap", min: 0, max: 3, nodes: 2, milliCPU: 2000, mem: 4 * test.GiB})
	p.Group("nap").GoesWithLastNodes()
	opts := testOptions()
	opts.NodeAutoprovisioningEnabled = true
	h := newHarness(t, opts, p, objs...)

	h.runOnce(t0)
	h.runOnce(t0.Add(10*time.Minute + time.Second))
	if d := sdtest.Deletions(p); !reflect.DeepEqual(d, []string{"nap:nap-n0,nap-n1"}) {
		t.Fatalf("DeleteNodes calls = %v, want both nodes of nap in one call", d)
	}
	h.runOnce(t0.Add(11 * time.Minute))
	h.runOnce(t0.Add(12 * time.Minute))

	ev := h.events()
	if n := countEvents(ev, "Normal DeletedNodeGroup Deleted empty node group nap involvedObject{kind=ConfigMap"); n != 1 {
		t.Errorf("%d DeletedNodeGroup events for nap, want 1: %v", n, ev)
	}
	if n := countEvents(ev, "FailedToDeleteNodeGroup"); n != 0 {
		t.Errorf("FailedToDeleteNodeGroup events: %v", ev)
	}
	if got := value("deleted_node_groups_total", map[string]string{"group_type": ""}) - before; got != 1 {
		t.Errorf("deleted_node_groups_total grew by %v, want 1", got)
	}
	if d := p.CallsOf("Delete"); len(d) != 1 || d[0].Group != "nap" {
		t.Errorf("Delete calls %+v, want one, of nap", d)
	}
	if len(p.NodeGroups()) != 1 || p.NodeGroups()[0].Id() != "base" {
		t.Errorf("node groups after: %v", p.NodeGroups())
	}
}

// An empty autoprovisioned group whose deletion the cloud refuses is asked
// again after a pause that doubles (1, 2, 4 minutes...), not every loop
// with a Warning event each time.
func TestRefusedGroupDeletionBacksOff(t *testing.T) {
	p, objs := cluster(
		groupSpec{id: "base", min: 1, max: 3, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB},
		groupSpec{id: "nap", min: 0, max: 3, nodes: 0, milliCPU: 2000, mem: 4 * test.GiB})
	p.Group("nap").GoesWithLastNodes() // autoprovisioned; Delete refuses while it has not gone
	opts := testOptions()
	opts.NodeAutoprovisioningEnabled = true
	h := newHarness(t, opts, p, objs...)

	var at []time.Duration
	for d := time.Duration(0); d <= 10*time.Minute; d += 10 * time.Second {
		before := len(p.CallsOf("Delete"))
		h.runOnce(t0.Add(d))
		if len(p.CallsOf("Delete")) > before {
			at = append(at, d)
		}
	}
	if want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute}; !reflect.DeepEqual(at, want) {
		t.Errorf("Delete asked at %v, want %v", at, want)
	}
	if n := countEvents(h.events(), "FailedToDeleteNodeGroup"); n != len(at) {
		t.Errorf("%d FailedToDeleteNodeGroup events for %d attempts", n, len(at))
	}
}
