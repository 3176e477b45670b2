package core

import (
	"fmt"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// snapshotSync keeps the cluster snapshot's base layer equal to the
// cluster between iterations, applying only what changed (by
// resourceVersion) instead of rebuilding it: rebuilding runs every pod
// through the scheduler's bookkeeping, which at 30,000 pods costs about a
// second per loop, while a loop's changes are usually a few dozen objects.
// Each iteration works in a fork on top (see begin/end), so the base never
// holds simulated pods or nodes.
type snapshotSync struct {
	snap  *simulator.ClusterSnapshot
	valid bool
	// The objects the base was last synced from. Cached objects are never
	// changed in place (an informer replaces them), so each one's name,
	// version and node are still what the base holds.
	nodes map[string]*apiv1.Node
	pods  map[types.UID]*apiv1.Pod
	// rebuilds counts full rebuilds (tests check steady loops do none).
	rebuilds int
}

// An object is unchanged when the cache hands back the same pointer (an
// informer replaces the object on every update) or, failing that, the same
// UID and non-empty resourceVersion.
func sameNode(synced, n *apiv1.Node) bool {
	return n == synced || (n.UID == synced.UID && n.ResourceVersion == synced.ResourceVersion && synced.ResourceVersion != "")
}

func samePod(synced, p *apiv1.Pod) bool {
	return p.Spec.NodeName == synced.Spec.NodeName &&
		(p == synced || (p.ResourceVersion == synced.ResourceVersion && synced.ResourceVersion != ""))
}

func newSnapshotSync(s *simulator.ClusterSnapshot) *snapshotSync {
	return &snapshotSync{snap: s}
}

// invalidate forces the next sync to rebuild.
func (s *snapshotSync) invalidate() { s.valid = false }

// begin brings the base up to date with nodes and the pods bound to them,
// sets its DRA objects (d, which the snapshot then owns: they are few, and
// replaced whole every loop), then forks the iteration's layer.
func (s *snapshotSync) begin(nodes []*apiv1.Node, pods []*apiv1.Pod, d *dra.Snapshot) error {
	for s.snap.ForkDepth() > 0 {
		s.snap.Revert()
	}
	if s.valid {
		if err := s.apply(nodes, pods); err != nil {
			klog.InfoS("Snapshot: incremental update failed; rebuilding", "err", err)
			s.valid = false
		}
	}
	if !s.valid {
		if err := s.rebuild(nodes, pods); err != nil {
			return err
		}
	}
	if err := s.snap.SetDRA(d); err != nil {
		return err
	}
	s.snap.Fork()
	return nil
}

// end drops the iteration's layer.
func (s *snapshotSync) end() {
	for s.snap.ForkDepth() > 0 {
		s.snap.Revert()
	}
}

func counted(p *apiv1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != apiv1.PodSucceeded && p.Status.Phase != apiv1.PodFailed
}

func (s *snapshotSync) rebuild(nodes []*apiv1.Node, pods []*apiv1.Pod) error {
	s.valid = false
	s.rebuilds++
	if err := s.snap.SetClusterState(nodes, pods); err != nil {
		return err
	}
	s.nodes = make(map[string]*apiv1.Node, len(nodes))
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	s.pods = make(map[types.UID]*apiv1.Pod, len(pods))
	for _, p := range pods {
		if !counted(p) {
			continue
		}
		if _, ok := s.nodes[p.Spec.NodeName]; ok {
			s.pods[p.UID] = p
		}
	}
	s.valid = true
	return nil
}

// apply brings the base to nodes and pods by what changed. A steady loop
// (every object the one synced) costs a lookup per node and per pod, and
// builds no map: at 5,000 nodes and 10,000 pods the three maps of every
// object it built were most of its cost, paid on every loop that
// simulates anything.
func (s *snapshotSync) apply(nodes []*apiv1.Node, pods []*apiv1.Pod) error {
	// Nodes: each listed one against the one synced. A status heartbeat or
	// a soft taint is taken in place (RefreshNode), so neither its pods
	// are re-added nor the snapshot's version changes (see
	// simulator.ClusterSnapshot.Version); a node changed otherwise goes
	// with its pods and comes back (fresh).
	var fresh []*apiv1.Node
	removed := map[string]bool{}
	matched := 0
	for _, n := range nodes {
		sn, ok := s.nodes[n.Name]
		if !ok {
			fresh = append(fresh, n)
			continue
		}
		matched++
		switch {
		case sameNode(sn, n):
		case sameForScheduling(sn, n):
			if err := s.snap.RefreshNode(n); err != nil {
				return err
			}
			s.nodes[n.Name] = n
		default:
			removed[n.Name] = true
			fresh = append(fresh, n)
		}
	}
	if matched < len(s.nodes) {
		// Some synced node is no longer listed: only then a set of names.
		listed := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			listed[n.Name] = true
		}
		for name := range s.nodes {
			if !listed[name] {
				removed[name] = true
			}
		}
	}
	for name := range removed {
		if err := s.snap.RemoveNode(name); err != nil {
			return err
		}
		delete(s.nodes, name)
	}
	if len(removed) > 0 {
		for uid, sp := range s.pods {
			if removed[sp.Spec.NodeName] {
				delete(s.pods, uid)
			}
		}
	}
	if len(fresh) > 0 {
		byNode := make(map[string][]*apiv1.Pod, len(fresh))
		for _, n := range fresh {
			byNode[n.Name] = nil
		}
		for _, p := range pods {
			if on, ok := byNode[p.Spec.NodeName]; ok && counted(p) {
				if p.UID == "" {
					return fmt.Errorf("pod %s/%s has no UID", p.Namespace, p.Name)
				}
				byNode[p.Spec.NodeName] = append(on, p)
			}
		}
		for _, n := range fresh {
			if err := s.snap.AddNodeInfo(framework.NewNodeInfo(n, byNode[n.Name]...)); err != nil {
				return err
			}
			s.nodes[n.Name] = n
			for _, p := range byNode[n.Name] {
				s.pods[p.UID] = p
			}
		}
	}

	// Pods: each counted one bound to a synced node against the one synced
	// (the fresh nodes' pods were synced with them just above).
	var changed []*apiv1.Pod
	seen := 0
	for _, p := range pods {
		sp, ok := s.pods[p.UID]
		if ok && sp == p {
			// The object synced (cached objects are never changed in
			// place): counted then, and its node is still synced (the
			// pods of the nodes removed above left s.pods).
			seen++
			continue
		}
		if !counted(p) {
			continue
		}
		if _, ok := s.nodes[p.Spec.NodeName]; !ok {
			continue
		}
		if p.UID == "" {
			return fmt.Errorf("pod %s/%s has no UID", p.Namespace, p.Name)
		}
		if ok {
			seen++
			if samePod(sp, p) {
				continue
			}
		}
		changed = append(changed, p)
	}
	if seen < len(s.pods) {
		// Some synced pod is no longer listed (or no longer counts): only
		// then a set of UIDs.
		listed := make(map[types.UID]bool, len(pods))
		for _, p := range pods {
			if counted(p) && s.nodes[p.Spec.NodeName] != nil {
				listed[p.UID] = true
			}
		}
		for uid, sp := range s.pods {
			if listed[uid] {
				continue
			}
			if err := s.snap.RemovePod(sp.Namespace, sp.Name, sp.Spec.NodeName); err != nil {
				return err
			}
			delete(s.pods, uid)
		}
	}
	for _, p := range changed {
		if sp, ok := s.pods[p.UID]; ok {
			if err := s.snap.RemovePod(sp.Namespace, sp.Name, sp.Spec.NodeName); err != nil {
				return err
			}
		}
		if err := s.snap.AddPod(p, p.Spec.NodeName); err != nil {
			return err
		}
		s.pods[p.UID] = p
	}
	return nil
}

// sameForScheduling reports whether b is a as far as the simulation can tell, differing
// only in resourceVersion, managed fields, its conditions' heartbeat times
// (what a kubelet's periodic status update changes when nothing else did)
// or PreferNoSchedule taints (the scheduler's filters ignore them; the
// autoscaler puts DeletionCandidateOfClusterAutoscaler on unneeded nodes,
// ten per loop).
func sameForScheduling(a, b *apiv1.Node) bool {
	if a == nil || b == nil || a.UID != b.UID || len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	return apiequality.Semantic.DeepEqual(schedulingView(a), schedulingView(b))
}

func schedulingView(n *apiv1.Node) *apiv1.Node {
	cp := *n
	cp.ResourceVersion = ""
	cp.ManagedFields = nil
	cp.Status.Conditions = slices.Clone(n.Status.Conditions)
	for i := range cp.Status.Conditions {
		cp.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	cp.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t apiv1.Taint) bool {
		return t.Effect == apiv1.TaintEffectPreferNoSchedule
	})
	if len(cp.Spec.Taints) == 0 {
		cp.Spec.Taints = nil
	}
	return &cp
}
