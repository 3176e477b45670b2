package scaleup

import (
	"fmt"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Provision adds count nodes to g for a need that is not a pending pod (a
// consolidation's replacement): it creates g when it does not exist yet,
// or grows it, through the executor scale-ups use. So the registry waits
// for the nodes as for any scale-up, refusals back off the group, and a
// creation whose answer was lost is the provider's to reconcile by
// listing; it is never sent again from here.
func (o *Orchestrator) Provision(g cloudprovider.NodeGroup, count int, tmpl *framework.NodeInfo, now time.Time) error {
	if count < 1 {
		return fmt.Errorf("node group %s: nothing to add (%d nodes)", g.Id(), count)
	}
	if !g.Exist() {
		res := &Result{}
		if ok, _ := o.exec.create(expander.Option{NodeGroup: g, NodeCount: count, NodeInfo: tmpl}, Input{Now: now}, res); !ok {
			return fmt.Errorf("creating node group %s with %d node(s) failed (see the FailedToCreateNodeGroup event)", g.Id(), count)
		}
		return nil
	}
	target, err := g.TargetSize()
	if err != nil {
		return fmt.Errorf("node group %s: target size: %w", g.Id(), err)
	}
	inc := Increase{GroupID: g.Id(), From: target, To: target + count, Max: g.MaxSize()}
	if inc.To > inc.Max {
		return fmt.Errorf("node group %s: %d more nodes would exceed its max size %d", g.Id(), count, inc.Max)
	}
	done, _, _ := o.exec.execute([]Increase{inc}, map[string]*framework.NodeInfo{g.Id(): tmpl}, now, false)
	if len(done) == 0 {
		return fmt.Errorf("growing node group %s to %d failed (see the FailedToScaleUpGroup event)", g.Id(), inc.To)
	}
	return nil
}
