package scaleup

import (
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
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

// MinSizeSkip is a group left below its min size this iteration, and why.
type MinSizeSkip struct {
	GroupID         string
	Target, MinSize int
	Reason          Reason
}

// planMinSize returns the increases that raise every group whose target is
// below its min size to it, as upstream's ScaleUpToNodeGroupMinSize: groups
// backed off, unhealthy or without a template are skipped, and the
// increases stay within the group's max, --max-nodes-total, --cores-total
// and --memory-total, counted in quotas as they are planned.
func (pl *Planner) planMinSize(groups []clusterstate.NodeGroupState, templates map[string]*framework.NodeInfo,
	quotas resourcequotas.Tracker, now time.Time) (plan []Increase, skipped []MinSizeSkip) {
	for _, gs := range groups {
		id, minSize := gs.Group.Id(), gs.Group.MinSize()
		if gs.Target >= minSize {
			continue
		}
		skip := MinSizeSkip{GroupID: id, Target: gs.Target, MinSize: minSize}
		if reason := pl.skipReason(gs, Input{Templates: templates, Now: now}); reason != "" && reason != ReasonMaxSize {
			skip.Reason = reason
			skipped = append(skipped, skip)
			continue
		}
		room, reason, _ := pl.room(gs, templates[id], &quotas, nil)
		n := min(minSize-gs.Target, room)
		if n <= 0 {
			skip.Reason = reason
			skipped = append(skipped, skip)
			continue
		}
		quotas.Add(templates[id].Node(), n)
		plan = append(plan, Increase{GroupID: id, From: gs.Target, To: gs.Target + n, Max: gs.Group.MaxSize()})
	}
	return plan, skipped
}

// templateNode looks up a group's template node, nil for a group without
// one.
func templateNode(templates map[string]*framework.NodeInfo) func(string) *apiv1.Node {
	return func(id string) *apiv1.Node {
		if t := templates[id]; t != nil {
			return t.Node()
		}
		return nil
	}
}
