package core

import (
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/groupdeletion"
)

// A refused deletion of an empty group is asked again after a pause that
// doubles with each refusal, from groupDeleteBackoff up to
// groupDeleteBackoffMax, and starts again from the shortest once a group
// went groupDeleteBackoffReset without one: the cloud's reason (a pool it
// will not delete) rarely changes within a loop, and each attempt costs a
// request and a Warning event.
const (
	groupDeleteBackoff      = time.Minute
	groupDeleteBackoffMax   = 30 * time.Minute
	groupDeleteBackoffReset = 3 * time.Hour
)

// groupDeletions is what deleteNodeGroup remembers: the autoprovisioned
// groups deleted, each recorded once (group IDs are never reused), until
// the provider no longer offers them, and the groups whose deletion was
// refused, backed off. Guarded by mu: removals' goroutines call it too.
type groupDeletions struct {
	mu      sync.Mutex
	deleted map[string]bool
	backoff *clusterstate.Backoff
}

func newGroupDeletions() groupDeletions {
	return groupDeletions{deleted: map[string]bool{}, backoff: clusterstate.NewBackoff(groupDeleteBackoff, groupDeleteBackoffMax, groupDeleteBackoffReset)}
}

// deleteEmptyAutoprovisioned deletes, with --node-autoprovisioning-enabled,
// the node groups node autoprovisioning created whose target is 0 (their
// nodes never came and were given up), and records those the provider
// deleted with their last nodes that no removal has reported yet. As
// upstream, a group is deleted once it is empty, not kept at a count of 0;
// the provider refuses to delete a group it did not create.
func (a *Autoscaler) deleteEmptyAutoprovisioned(now time.Time) {
	if !a.opts.NodeAutoprovisioningEnabled {
		return
	}
	groups := a.provider.NodeGroups()
	a.forgetDeletedGroups(groups, now)
	for _, g := range groups {
		if !g.Autoprovisioned() {
			continue
		}
		if target, err := g.TargetSize(); g.Exist() && (err != nil || target > 0) {
			continue
		}
		if a.deleteNodeGroup(g, now) {
			a.acted = true
		}
	}
}

// forgetDeletedGroups bounds what deleteNodeGroup remembers: a deleted
// group the provider no longer offers, with no removal in flight that
// could still report it gone, is forgotten; so are backoffs long over.
func (a *Autoscaler) forgetDeletedGroups(groups []cloudprovider.NodeGroup, now time.Time) {
	offered := make(map[string]bool, len(groups))
	for _, g := range groups {
		offered[g.Id()] = true
	}
	a.groupDeletions.mu.Lock()
	defer a.groupDeletions.mu.Unlock()
	for id := range a.groupDeletions.deleted {
		if !offered[id] && a.removals.DeletingInGroup(id) == 0 {
			delete(a.groupDeletions.deleted, id)
		}
	}
	a.groupDeletions.backoff.Cleanup(now)
}

// deleteNodeGroup calls Delete on an autoprovisioned group that has become
// empty and has the reporter record the deletion once per group, however
// many removals report it. When scale-down's last removal in a pool made the provider delete
// the pool in place of its nodes, Delete has nothing left to do. A group
// whose deletion was refused is not asked again before its backoff ends.
// It is called from the loop and from removals' goroutines, and reports
// whether this call deleted the group.
func (a *Autoscaler) deleteNodeGroup(g cloudprovider.NodeGroup, now time.Time) bool {
	a.groupDeletions.mu.Lock()
	defer a.groupDeletions.mu.Unlock()
	if a.groupDeletions.deleted[g.Id()] {
		return false
	}
	if off, _, until := a.groupDeletions.backoff.BackedOff(g.Id(), now); off {
		klog.V(4).InfoS("Deleting an empty autoprovisioned node group: backed off after a refusal", "group", g.Id(), "until", until)
		return false
	}
	if err := g.Delete(); err != nil {
		until := a.groupDeletions.backoff.Backoff(g.Id(), clusterstate.BackoffInfo{ErrorMessage: err.Error()}, now)
		a.report.NodeGroupDeleted(groupdeletion.Outcome{GroupID: g.Id(), Err: err, NextAttempt: until})
		return false
	}
	a.groupDeletions.backoff.Remove(g.Id())
	a.groupDeletions.deleted[g.Id()] = true
	a.report.NodeGroupDeleted(groupdeletion.Outcome{GroupID: g.Id()})
	return true
}
