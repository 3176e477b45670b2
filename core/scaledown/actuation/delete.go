package actuation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// DeleteEmpty removes nodes running only DaemonSet and mirror pods, in bulk:
// taint them all, check they are still empty, then one DeleteNodes call per
// group. The taints are written before it returns, as upstream's
// taintNodesSync and Drain write theirs: the loop's soft taints, which come
// after, then cannot take the client's QPS budget ahead of the batch's
// taints and hold its delay after taint back by seconds.
func (a *Actuator) DeleteEmpty(ctx context.Context, nodes []*scaledown.UnneededNode) {
	if len(nodes) == 0 {
		return
	}
	a.started(nodes, false)
	a.deps.Outcomes.RemovalsStarted(scaledown.RemovalStart{Nodes: nodes})
	tainted, delay := a.markNodes(ctx, nodes)
	if len(tainted) == 0 {
		return
	}
	a.run(func() { a.deleteEmpty(ctx, tainted, delay) })
}

// deleteEmpty waits the delay after taint, prepares each tainted node (check
// still empty, evict its DaemonSet pods, wait for its delay-deletion
// annotations), then deletes the prepared ones group by group. The tracker
// hears every outcome once the whole batch is done.
func (a *Actuator) deleteEmpty(ctx context.Context, tainted []*scaledown.UnneededNode, delay time.Duration) {
	outcomes := make(map[string]deletiontracker.Outcome, len(tainted))
	defer func() {
		for _, u := range tainted {
			a.deps.Removals.Ended(u.Node.Name, outcomes[u.Node.Name])
		}
	}()
	if !a.waitAfterTaint(ctx, delay, names(tainted)) {
		for _, u := range tainted {
			a.fail(ctx, u.Node, scaledown.FailedInternal, ctx.Err())
			outcomes[u.Node.Name] = deletiontracker.Failed
		}
		return
	}
	cached := a.cachedPods(tainted)
	var mu sync.Mutex
	var ready []*scaledown.UnneededNode
	var wg sync.WaitGroup
	// In parallel: a node's delay-deletion wait must not hold the others.
	for _, u := range tainted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pods, fresh := cached[u.Node.Name]
			outcome, ok := a.prepareEmpty(ctx, u, pods, fresh)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				ready = append(ready, u)
			} else {
				outcomes[u.Node.Name] = outcome
			}
		}()
	}
	wg.Wait()
	// Deleted in the order planned.
	slices.SortFunc(ready, func(x, y *scaledown.UnneededNode) int {
		return slices.Index(tainted, x) - slices.Index(tainted, y)
	})
	for _, group := range byGroup(ready) {
		for name, outcome := range a.deleteGroup(ctx, group) {
			outcomes[name] = outcome
		}
	}
}

// prepareEmpty checks a tainted empty node is still empty, evicts its
// DaemonSet pods (best effort) and waits for its delay-deletion
// annotations. pods are the node's pods from the cache when cached says
// the cache could answer (see cachedPods); otherwise the API server is
// asked. When the node is not to be deleted it returns why the removal
// ended, and false.
func (a *Actuator) prepareEmpty(ctx context.Context, u *scaledown.UnneededNode, pods []*apiv1.Pod, cached bool) (deletiontracker.Outcome, bool) {
	// A pod may have been bound since the simulation. With the taint on
	// (and seen by the scheduler after the delay after taint), nothing
	// new can arrive, so the answer is final. No drain rules apply: any
	// pod to move or blocking one means a pod arrived, so the node is not
	// empty either way.
	if !cached {
		var err error
		if pods, err = a.podsOnNode(ctx, u.Node.Name); err != nil {
			a.fail(ctx, u.Node, scaledown.FailedAPICall, fmt.Errorf("checking the node is still empty: %w", err))
			return deletiontracker.Failed, false
		}
	}
	if toMove, blocking := drain.PodsToMove(a.withoutExpendable(pods), nil, drain.Options{}, a.clock.Now()); len(toMove) > 0 || blocking != nil {
		klog.InfoS("Scale-down: node is no longer empty; not removing it", "node", klog.KObj(u.Node), "arrived", arrivedPods(toMove, blocking))
		if _, err := UnmarkToBeDeleted(ctx, a.deps.Kube, u.Node.Name, a.opts.CordonNodeBeforeTerminate); err != nil {
			klog.ErrorS(err, "Scale-down: giving the node back failed", "node", klog.KObj(u.Node))
		}
		return deletiontracker.Kept, false
	}
	// Best effort, as upstream: the node goes whatever the answers. Each
	// DaemonSet pod gets its own drain priority group's grace period, the
	// groups lowest first, as upstream's EvictDaemonSetPods does.
	ds := daemonSetPodsToEvict(pods, a.opts.DaemonSetEvictionForEmptyNodes)
	groups := a.opts.DrainGroups()
	for i, g := range groups {
		a.evictBestEffort(ctx, u.Node, slices.DeleteFunc(slices.Clone(ds), func(p *apiv1.Pod) bool { return drainGroupOf(p, groups) != i }), g.GracePeriodSeconds)
	}
	if err := a.waitForDelayDeletion(ctx, u.Node); err != nil {
		a.fail(ctx, u.Node, scaledown.FailedAPICall, err)
		return deletiontracker.Failed, false
	}
	return deletiontracker.Deleted, true
}

// byGroup splits nodes by node group, in the order the groups first appear.
func byGroup(nodes []*scaledown.UnneededNode) [][]*scaledown.UnneededNode {
	index := map[string]int{}
	var out [][]*scaledown.UnneededNode
	for _, u := range nodes {
		i, ok := index[u.GroupID]
		if !ok {
			i = len(out)
			index[u.GroupID] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], u)
	}
	return out
}

// deleteGroup asks the provider to delete one group's prepared nodes in one
// call, gives back those it did not delete when it fails, and records the
// removed ones. It returns each node's outcome.
func (a *Actuator) deleteGroup(ctx context.Context, group []*scaledown.UnneededNode) map[string]deletiontracker.Outcome {
	outcomes := make(map[string]deletiontracker.Outcome, len(group))
	nodes := make([]*apiv1.Node, len(group))
	for i, u := range group {
		nodes[i] = u.Node
	}
	started, err := a.deleteNodes(nodes)
	var gone []*scaledown.UnneededNode
	for _, u := range group {
		// The group may have deleted some before failing: those keep their
		// taint, or pods would be scheduled onto a node going away.
		if err != nil && !started[u.Node.Name] {
			a.fail(ctx, u.Node, scaledown.FailedCloudProvider, err)
			outcomes[u.Node.Name] = deletiontracker.Failed
			continue
		}
		outcomes[u.Node.Name] = deletiontracker.Deleted
		gone = append(gone, u)
		a.deps.Outcomes.NodeRemoved(u)
	}
	if len(gone) > 0 {
		names := make([]string, len(gone))
		for i, u := range gone {
			names[i] = u.Node.Name
		}
		klog.InfoS("Scale-down: removed empty nodes", "nodes", strings.Join(names, ", "), "nodeGroup", group[0].GroupID)
	}
	return outcomes
}

// deleteNodes asks the nodes' group to delete them (all from one group).
// When DeleteNodes fails, deleted names the nodes the group deleted before
// failing: those it lists as deleting, or no longer lists though it did
// before the call. The same group object is asked before and after.
func (a *Actuator) deleteNodes(nodes []*apiv1.Node) (deleted map[string]bool, err error) {
	g, err := a.deps.Provider.NodeGroupForNode(nodes[0])
	if err != nil {
		return nil, fmt.Errorf("node group of %s: %w", nodes[0].Name, err)
	}
	if g == nil {
		return nil, fmt.Errorf("node %s belongs to no node group", nodes[0].Name)
	}
	before, _ := g.Nodes() // nil on error: then only "deleting" counts
	err = g.DeleteNodes(nodes)
	if err == nil {
		if !g.Exist() && a.deps.GroupGone != nil {
			a.deps.GroupGone(g)
		}
		return nil, nil
	}
	after, lerr := g.Nodes()
	if lerr != nil {
		klog.InfoS("Scale-down: listing a node group's instances after a failed deletion failed; keeping all its nodes", "nodeGroup", g.Id(), "err", lerr)
		return nil, err
	}
	state := func(ins []cloudprovider.Instance) map[string]*cloudprovider.InstanceStatus {
		m := make(map[string]*cloudprovider.InstanceStatus, len(ins))
		for _, in := range ins {
			m[in.Id] = in.Status
		}
		return m
	}
	was, now := state(before), state(after)
	deleted = map[string]bool{}
	for _, n := range nodes {
		id := n.Spec.ProviderID
		_, listedBefore := was[id]
		st, listed := now[id]
		if (listedBefore && !listed) || (listed && st != nil && st.State == cloudprovider.InstanceDeleting) {
			deleted[n.Name] = true
		}
	}
	return deleted, err
}
