// Package giveup gives up on nodes that will not come, as upstream's
// removeOldUnregisteredNodes and deleteCreatedNodesWithErrors do: nodes
// that never registered within --max-node-provision-time, and instances
// the cloud reports failed. The cluster state registry plans (it knows
// the nodes and the scale-ups); Run carries the plans out through the
// provider and returns Outcomes, which core/report records.
package giveup

import (
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// Outcome is what carrying out one give-up plan did: how far the target
// went down, and whether the provider deleted the plan's instances.
type Outcome struct {
	Plan      clusterstate.GiveUpPlan
	Decreased int
	DeleteErr error // nil when the provider deleted Plan.Instances
}

// Recorder records what Run did: the metrics, events and health of the
// groups given up on (core/report implements it).
type Recorder interface {
	GiveUps(gaveUp []Outcome, now time.Time)
}

// Run gives up on nodes that will not come: for each
// group the registry plans (PlanRetryDelete, then PlanGiveUp, which sees
// the target the retry left), this deletes the plan's instances when the
// provider can, lowers the target for the rest (never below the registered
// nodes), and records the outcome in the registry, which backs the group
// off when a scale-up of ours failed. It returns what each plan did, for
// the reporter. The caller should then run UpdateNodes again before
// scaling up.
func Run(r *clusterstate.Registry, now time.Time) ([]Outcome, error) {
	var out []Outcome
	var errs []string
	for _, gs := range r.NodeGroups() {
		id := gs.Group.Id()
		if p, ok := r.PlanRetryDelete(id, now); ok {
			out = append(out, retryDelete(r, p, now))
		}
		if p, ok := r.PlanGiveUp(id, now); ok {
			g, err := giveUp(r, p, now)
			if err != nil {
				errs = append(errs, err.Error())
			}
			out = append(out, g)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("fixing node group sizes: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// giveUp carries out a give-up plan: it asks the provider to delete the
// plan's instances, lowers the target for what the deletions did not take
// off, and tells the registry the target it left (the registry, which
// planned the give-up, backs the group off with it: the next plan of the
// same loop must see both).
func giveUp(r *clusterstate.Registry, p clusterstate.GiveUpPlan, now time.Time) (Outcome, error) {
	klog.InfoS("Giving up on nodes that will not come", "nodeGroup", p.GroupID, "nodes", p.Decrease, "reason", p.Reason, "why", p.Why)
	g := Outcome{Plan: p}
	deleted := 0
	if g.DeleteErr = deleteInstances(p); g.DeleteErr == nil {
		deleted = len(p.Instances)
	} else if len(p.Instances) > 0 {
		klog.InfoS("Lowering the target instead of deleting the instances", "nodeGroup", p.GroupID)
	}
	target, err := lowerTarget(p, deleted)
	g.Decreased = r.RecordGiveUp(p, target, now)
	if l, ok := p.Group.(cloudprovider.ProvisionTimeoutLearner); ok && p.Reason == clusterstate.GiveUpTimeout && !p.Retry {
		// Nodes that never came: the provider may hold their size
		// unavailable, so the next plans take another.
		l.NodesNeverCame()
	}
	return g, err
}

// retryDelete carries out a plan to delete again instances given up
// earlier.
func retryDelete(r *clusterstate.Registry, p clusterstate.GiveUpPlan, now time.Time) Outcome {
	klog.V(1).InfoS("Asking again to delete given-up instances the cloud still lists", "nodeGroup", p.GroupID, "instances", len(p.Instances))
	g := Outcome{Plan: p, DeleteErr: deleteInstances(p)}
	target := p.Target
	if t, err := p.Group.TargetSize(); err == nil {
		target = t
	} else if g.DeleteErr == nil {
		target -= len(p.Instances)
	}
	g.Decreased = r.RecordGiveUp(p, target, now)
	return g
}

// lowerTarget lowers the group's target by the part of the plan's decrease
// that deleting instances did not take off, never below its registered
// nodes, and returns the target it leaves. It starts from the cloud's own
// target after the deletions when the provider can say it. The error is
// returned, not logged: Run's caller logs it.
func lowerTarget(p clusterstate.GiveUpPlan, deleted int) (int, error) {
	target := p.Target - deleted
	if t, err := p.Group.TargetSize(); err == nil {
		target = t
	}
	rest := min(p.Decrease-deleted, target-p.Registered)
	if rest <= 0 {
		return target, nil
	}
	if err := p.Group.DecreaseTargetSize(-rest); err != nil {
		return target, fmt.Errorf("node group %s: decrease target by %d: %w", p.GroupID, rest, err)
	}
	klog.InfoS("Node group target lowered", "nodeGroup", p.GroupID, "from", target, "to", target-rest)
	return target - rest, nil
}

// deleteInstances asks the provider to delete the plan's instances, which
// have no Node (nil when there are none).
func deleteInstances(p clusterstate.GiveUpPlan) error {
	if len(p.Instances) == 0 {
		return nil
	}
	// DeleteNodes takes Node objects: build placeholders carrying the
	// provider ID, marked as such so the provider can match them by it.
	fake := make([]*apiv1.Node, 0, len(p.Instances))
	names := make([]string, 0, len(p.Instances))
	for _, in := range p.Instances {
		n := &apiv1.Node{}
		n.Name = in.Id
		n.Spec.ProviderID = in.Id
		reason := cloudprovider.FakeNodeUnregistered
		if in.Status != nil && in.Status.ErrorInfo != nil {
			reason = cloudprovider.FakeNodeCreateError
		}
		n.Annotations = map[string]string{cloudprovider.FakeNodeReasonAnnotation: reason}
		fake = append(fake, n)
		names = append(names, in.Id)
	}
	if err := p.Group.DeleteNodes(fake); err != nil {
		klog.ErrorS(err, "Cannot delete instances without a Node", "nodeGroup", p.GroupID, "instances", names)
		return err
	}
	klog.InfoS("Deleted instances without a Node", "nodeGroup", p.GroupID, "instances", names)
	return nil
}
