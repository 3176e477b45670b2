package scaleup

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// AnyBelowMinSize tells whether some group's target is below its min size.
func AnyBelowMinSize(groups []clusterstate.NodeGroupState) bool {
	for _, gs := range groups {
		if gs.Target < gs.Group.MinSize() {
			return true
		}
	}
	return false
}

// ScaleUpToMinSize raises every group whose target is below its min size to
// it (--enforce-node-group-min-size), as upstream's
// ScaleUpToNodeGroupMinSize: groups backed off, unhealthy or without a
// template are left for a later iteration, and the increases stay within
// the group's max, --max-nodes-total, --cores-total and --memory-total.
// It returns the increases made.
func (o *Orchestrator) ScaleUpToMinSize(nodes []*apiv1.Node, templates map[string]*framework.NodeInfo, now time.Time) []Increase {
	groups := o.registry.NodeGroups()
	u := o.usage(Input{Nodes: nodes, Templates: templates}, groups)
	var plan []Increase
	for _, gs := range groups {
		id, minSize := gs.Group.Id(), gs.Group.MinSize()
		if gs.Target >= minSize {
			continue
		}
		if reason := o.skipReason(gs, Input{Templates: templates, Now: now}); reason != "" && reason != ReasonMaxSize {
			klog.Warningf("Min size: node group %s is below its min size (%d < %d) but %s", id, gs.Target, minSize, reason)
			continue
		}
		room, limitReason, _ := o.room(gs, templates[id], u, nil)
		n := min(minSize-gs.Target, room)
		if n <= 0 {
			klog.Warningf("Min size: node group %s is below its min size (%d < %d) but %s", id, gs.Target, minSize, limitReason)
			continue
		}
		c, m := nodeCapacity(templates[id].Node())
		u.nodes += n
		u.milliCPU += c * int64(n)
		u.mem += m * int64(n)
		plan = append(plan, Increase{GroupID: id, From: gs.Target, To: gs.Target + n, Max: gs.Group.MaxSize()})
	}
	if len(plan) == 0 {
		return nil
	}
	done, _, _ := o.execute(plan, templates, now)
	if len(done) > 0 {
		klog.Infof("Min size: %s (--enforce-node-group-min-size)", increasesString(done))
	}
	return done
}
