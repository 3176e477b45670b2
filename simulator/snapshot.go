// Package simulator answers "what if" questions about scheduling: would these
// pods fit, how many template nodes would they need, could this node's pods go
// elsewhere. All answers come from the kube-scheduler framework's own filter
// plugins running against an in-memory ClusterSnapshot.
//
// It knows nothing of clouds or of the autoscaler's loop: it imports only its
// own subpackages (framework, drain) and the scheduler, and core/scaleup and
// core/scaledown ask it their questions.
package simulator

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// ClusterSnapshot holds nodes and the pods bound to them, in the form the
// scheduler framework reads (the in-tree scheduler NodeInfo, with requested
// resources, used ports and affinity pods kept up to date incrementally).
//
// Fork/Revert/Commit are implemented with an undo log per layer rather than a
// copy of the world: the first time a layer changes a node, the node's
// NodeInfo is cloned (copy-on-write) and the previous one is remembered.
// Fork is O(1); Revert and Commit cost O(nodes touched in the layer).
//
// A ClusterSnapshot is not safe for concurrent use.
type ClusterSnapshot struct {
	nodes  map[string]*schedframework.NodeInfo
	layers []*snapshotLayer

	// Caches for the scheduler framework's listers. list is sorted by node
	// name, so results are deterministic; adding, removing or restoring a
	// node edits it in place, keeping it equal to a rebuild: a removal
	// simulation per unneeded node, or a template node per scale-up option,
	// must not cost a sort of every node name. listIndex is a hint only
	// (positions shift on insertion and removal): findInList checks it.
	list      []fwk.NodeInfo
	listIndex map[string]int
	listValid bool

	affinityList          []fwk.NodeInfo
	antiAffinityList      []fwk.NodeInfo
	nonHostAntiAffinity   []fwk.NodeInfo
	affinityListsAreValid bool

	// podInfoTemplates: per exemplar pod, the scheduler PodInfo whose
	// computed data AddEquivalentPod shares. A cache only: not part of the
	// forked state; dropped by SetClusterState and whenever the last fork
	// ends (a loop's pending pods are not the next loop's), and bounded.
	podInfoTemplates map[*apiv1.Pod]*schedframework.PodInfo

	// dra holds the ResourceSlices, DeviceClasses and ResourceClaims; it
	// forks and reverts with the nodes, so claims allocated to place a pod
	// are undone with the pod.
	dra *dra.Snapshot

	// version names the content: see Version.
	version uint64
	// boundMemo: PlacementBound's sums over every node, by version and
	// unit (a cache only).
	boundMemo []boundMemo
}

// snapshotVersions hands out versions, process-wide, so that no two
// contents (of one snapshot or of two) ever share one.
var snapshotVersions atomic.Uint64

// Version identifies what the snapshot holds: every change of nodes, pods
// or DRA objects gives a new version never used before, and Revert returns
// to the version the content had at the matching Fork. Equal versions mean
// the same nodes and pods, so a result computed from them (a scale-down
// loop's removal simulations) may be reused. Claims reserved or released
// through DRA() inside a fork do not change it: a caller relying on it with
// DRA objects present must account for them itself.
func (s *ClusterSnapshot) Version() uint64 { return s.version }

// changed gives the content a new version.
func (s *ClusterSnapshot) changed() { s.version = snapshotVersions.Add(1) }

// maxPodInfoTemplates bounds the exemplar cache for callers that never fork.
const maxPodInfoTemplates = 10000

// snapshotLayer remembers, for every node first changed while this layer was
// on top, the NodeInfo it had before (nil when the node did not exist).
type snapshotLayer struct {
	saved map[string]*schedframework.NodeInfo
	// version is the snapshot's version when the layer began.
	version uint64
}

// NewClusterSnapshot returns an empty snapshot.
func NewClusterSnapshot() *ClusterSnapshot {
	return &ClusterSnapshot{nodes: map[string]*schedframework.NodeInfo{}, dra: dra.NewSnapshot(nil, nil, nil), version: snapshotVersions.Add(1)}
}

// SetDRA replaces the snapshot's DRA objects (ResourceSlices, DeviceClasses,
// ResourceClaims) with d, which the snapshot then owns. Slices of nodes not
// in the snapshot are dropped: their devices cannot be allocated. It must be
// called outside of any fork, after the nodes are set.
func (s *ClusterSnapshot) SetDRA(d *dra.Snapshot) error {
	if len(s.layers) > 0 {
		return fmt.Errorf("DRA objects replaced inside a fork")
	}
	if d == nil {
		d = dra.NewSnapshot(nil, nil, nil)
	}
	d.KeepNodes(s.HasNode)
	if !d.Empty() || !s.dra.Empty() {
		s.changed()
	}
	s.dra = d
	return nil
}

// mayHoldDevices tells whether p holds devices or may be given some when
// placed: claims of its own, a claim for its extended resources
// (status.extendedResourceClaimStatus), or extended resources a
// DeviceClass serves. Such a pod's placement changes claims, not only the
// node it lands on.
func (s *ClusterSnapshot) mayHoldDevices(p *apiv1.Pod) bool {
	return len(p.Spec.ResourceClaims) > 0 || p.Status.ExtendedResourceClaimStatus != nil || s.dra.ServesExtendedResources(p)
}

// DRA returns the snapshot's DRA objects, as changed by the simulation so
// far. Changes made through it fork and revert with the snapshot.
func (s *ClusterSnapshot) DRA() *dra.Snapshot { return s.dra }

// SetClusterState replaces the whole content of the snapshot (and drops any
// forks) with nodes and the pods bound to them by spec.nodeName. Pods not
// bound, bound to an unknown node, or terminal (Succeeded/Failed: the
// scheduler does not count them either) are ignored.
func (s *ClusterSnapshot) SetClusterState(nodes []*apiv1.Node, scheduledPods []*apiv1.Pod) error {
	s.nodes = make(map[string]*schedframework.NodeInfo, len(nodes))
	s.changed()
	for range s.layers {
		s.dra.Revert()
	}
	s.layers = nil
	s.podInfoTemplates = nil
	s.invalidateAll()
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, found := s.nodes[n.Name]; found {
			return fmt.Errorf("node %s listed twice", n.Name)
		}
		info := schedframework.NewNodeInfo()
		info.SetNode(n)
		s.nodes[n.Name] = info
	}
	ignored := 0
	for _, p := range scheduledPods {
		if p == nil || p.Spec.NodeName == "" || isTerminal(p) {
			continue
		}
		info, found := s.nodes[p.Spec.NodeName]
		if !found {
			ignored++
			continue
		}
		info.AddPodInfo(newPodInfo(p))
	}
	if ignored > 0 {
		klog.V(4).InfoS("Snapshot: pods bound to nodes not in the snapshot were left out", "pods", ignored)
	}
	return nil
}

// AddNodeInfo adds a node with its pods and the ResourceSlices publishing
// its devices. The node name must be new.
func (s *ClusterSnapshot) AddNodeInfo(ni *framework.NodeInfo) error {
	if ni == nil || ni.Node() == nil {
		return fmt.Errorf("node info without a node")
	}
	name := ni.Node().Name
	if _, found := s.nodes[name]; found {
		return fmt.Errorf("node %s already in the snapshot", name)
	}
	info := schedulerNodeInfo(ni)
	s.save(name)
	s.nodes[name] = info
	s.dra.SetNodeSlices(name, ni.ResourceSlices())
	// Inserted at its place: the list stays sorted, so the template and
	// upcoming nodes a scale-up adds and reverts never cost a re-sort of
	// every node name (at 5,000 nodes, a tenth of a pending-pod loop).
	s.insertInList(name, info)
	s.touched(nil, info)
	return nil
}

// schedulerNodeInfo is ni as the scheduler framework keeps it: the node
// and its pods' requests summed.
func schedulerNodeInfo(ni *framework.NodeInfo) *schedframework.NodeInfo {
	info := schedframework.NewNodeInfo()
	info.SetNode(ni.Node())
	for _, p := range ni.Pods() {
		info.AddPodInfo(newPodInfo(p))
	}
	return info
}

// RemoveNode removes a node, its pods and its ResourceSlices. The claims of
// its pods are left as they are (see RemovalSimulator for moving them).
func (s *ClusterSnapshot) RemoveNode(nodeName string) error {
	info, found := s.nodes[nodeName]
	if !found {
		return fmt.Errorf("node %s not in the snapshot", nodeName)
	}
	s.save(nodeName)
	delete(s.nodes, nodeName)
	s.dra.SetNodeSlices(nodeName, nil)
	s.removeFromList(nodeName)
	s.touched(info, nil)
	return nil
}

// RefreshNode swaps the Node object held for n.Name for n, a later version
// of it that the scheduler reads the same (the caller's judgement: a status
// heartbeat, a PreferNoSchedule taint), outside any fork. The version stays:
// results computed before still hold. Without it the snapshot would keep
// each such node's previous object alive beside the informer's current one,
// which after a kubelet's periodic status report is every node.
func (s *ClusterSnapshot) RefreshNode(n *apiv1.Node) error {
	if len(s.layers) > 0 {
		return fmt.Errorf("node %s: refreshed inside a fork", n.Name)
	}
	info, found := s.nodes[n.Name]
	if !found {
		return fmt.Errorf("node %s not in the snapshot", n.Name)
	}
	info.SetNode(n)
	return nil
}

// AddPod places pod on nodeName. The pod object is stored as given: the
// caller must not modify it afterwards.
func (s *ClusterSnapshot) AddPod(pod *apiv1.Pod, nodeName string) error {
	if pod == nil {
		return fmt.Errorf("nil pod")
	}
	return s.addPodInfo(newPodInfo(pod), nodeName)
}

// AddEquivalentPod places pod on nodeName, stored with spec.nodeName set (a
// shallow copy when it differs; the caller's object is not changed). pod must
// be equivalent to exemplar as GroupPods decides (same controller, same
// scheduling spec): the scheduler's per-pod bookkeeping (resource requests,
// parsed affinity terms) is computed once per exemplar and shared, which
// halves the cost of placing thousands of replicas.
func (s *ClusterSnapshot) AddEquivalentPod(pod, exemplar *apiv1.Pod, nodeName string) error {
	if pod == nil {
		return fmt.Errorf("nil pod")
	}
	stored := withNodeName(pod, nodeName)
	if exemplar == nil {
		return s.addPodInfo(newPodInfo(stored), nodeName)
	}
	if tmpl, found := s.podInfoTemplates[exemplar]; found {
		return s.addPodInfo(sharePodInfo(tmpl, stored), nodeName)
	}
	pi := newPodInfo(stored)
	pi.CalculateResource() // cached inside pi, then shared by its copies
	if s.podInfoTemplates == nil || len(s.podInfoTemplates) >= maxPodInfoTemplates {
		s.podInfoTemplates = map[*apiv1.Pod]*schedframework.PodInfo{}
	}
	s.podInfoTemplates[exemplar] = pi
	return s.addPodInfo(pi, nodeName)
}

// sharePodInfo returns a copy of tmpl for pod, keeping tmpl's computed
// requests and affinity terms. Only valid for a pod equivalent to tmpl's.
func sharePodInfo(tmpl *schedframework.PodInfo, pod *apiv1.Pod) *schedframework.PodInfo {
	cp := *tmpl
	cp.Pod = pod
	return &cp
}

func (s *ClusterSnapshot) addPodInfo(pi *schedframework.PodInfo, nodeName string) error {
	info, err := s.mutable(nodeName)
	if err != nil {
		return err
	}
	before := hasAffinityPods(info)
	info.AddPodInfo(pi)
	if before || hasAffinityPods(info) {
		s.affinityListsAreValid = false
	}
	return nil
}

// RemovePod removes the pod namespace/podName from nodeName.
func (s *ClusterSnapshot) RemovePod(namespace, podName, nodeName string) error {
	old, found := s.nodes[nodeName]
	if !found {
		return fmt.Errorf("node %s not in the snapshot", nodeName)
	}
	idx := -1
	for i, pi := range old.Pods {
		p := pi.GetPod()
		if p.Namespace == namespace && p.Name == podName {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("pod %s/%s not on node %s", namespace, podName, nodeName)
	}
	// Rebuild rather than use NodeInfo.RemovePod: the scheduler's version keys
	// pods by UID, and simulated pods (templates, tests) may not have one.
	info := schedframework.NewNodeInfo()
	info.SetNode(old.Node())
	for i, pi := range old.Pods {
		if i != idx {
			info.AddPodInfo(pi)
		}
	}
	s.replace(nodeName, info)
	s.touched(old, info)
	return nil
}

// GetNodeInfo returns the node and its pods. The result is a copy of the
// snapshot's view: later changes to the snapshot do not show in it.
func (s *ClusterSnapshot) GetNodeInfo(nodeName string) (*framework.NodeInfo, error) {
	info, found := s.nodes[nodeName]
	if !found {
		return nil, fmt.Errorf("node %s not in the snapshot", nodeName)
	}
	return s.toNodeInfo(info), nil
}

// NodeInfos returns every node with its pods, in a stable order.
func (s *ClusterSnapshot) NodeInfos() []*framework.NodeInfo {
	list := s.nodeList()
	out := make([]*framework.NodeInfo, 0, len(list))
	for _, info := range list {
		out = append(out, s.toNodeInfo(info.(*schedframework.NodeInfo)))
	}
	return out
}

// NodeNames returns the names of all nodes in the snapshot in a stable order.
func (s *ClusterSnapshot) NodeNames() []string {
	list := s.nodeList()
	out := make([]string, 0, len(list))
	for _, info := range list {
		out = append(out, info.Node().Name)
	}
	return out
}

// HasNode tells whether nodeName is in the snapshot.
func (s *ClusterSnapshot) HasNode(nodeName string) bool {
	_, found := s.nodes[nodeName]
	return found
}

// Fork starts a new layer: changes from now on can be dropped with Revert or
// kept with Commit.
func (s *ClusterSnapshot) Fork() {
	s.layers = append(s.layers, &snapshotLayer{saved: map[string]*schedframework.NodeInfo{}, version: s.version})
	s.dra.Fork()
}

// Revert drops every change made since the matching Fork. Without a fork it
// does nothing.
func (s *ClusterSnapshot) Revert() {
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	s.layers = s.layers[:len(s.layers)-1]
	s.version = top.version
	s.dra.Revert()
	if len(s.layers) == 0 {
		s.podInfoTemplates = nil
	}
	for name, old := range top.saved {
		cur, exists := s.nodes[name]
		if old == nil {
			if exists {
				delete(s.nodes, name)
				s.removeFromList(name)
			}
		} else {
			s.nodes[name] = old
			if exists {
				s.replaceInList(name, old)
			} else {
				s.insertInList(name, old)
			}
		}
		if hasAffinityPods(cur) || hasAffinityPods(old) {
			s.affinityListsAreValid = false
		}
	}
}

// Commit keeps the changes made since the matching Fork, folding them into
// the layer below (so an outer Revert still drops them).
func (s *ClusterSnapshot) Commit() error {
	if len(s.layers) == 0 {
		return fmt.Errorf("commit without a fork")
	}
	top := s.layers[len(s.layers)-1]
	s.layers = s.layers[:len(s.layers)-1]
	s.dra.Commit()
	if len(s.layers) == 0 {
		s.podInfoTemplates = nil
		return nil
	}
	parent := s.layers[len(s.layers)-1]
	for name, old := range top.saved {
		if _, found := parent.saved[name]; !found {
			parent.saved[name] = old
		}
	}
	return nil
}

// ForkDepth is the number of open forks.
func (s *ClusterSnapshot) ForkDepth() int { return len(s.layers) }

// save records the current NodeInfo of name in the top layer, once.
func (s *ClusterSnapshot) save(name string) {
	s.changed()
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	if _, found := top.saved[name]; !found {
		top.saved[name] = s.nodes[name] // nil when the node does not exist yet
	}
}

// mutable returns a NodeInfo of nodeName that may be changed in place: the
// stored one when the top layer already owns it, a clone otherwise.
func (s *ClusterSnapshot) mutable(nodeName string) (*schedframework.NodeInfo, error) {
	cur, found := s.nodes[nodeName]
	if !found {
		return nil, fmt.Errorf("node %s not in the snapshot", nodeName)
	}
	s.changed()
	if len(s.layers) == 0 {
		return cur, nil
	}
	top := s.layers[len(s.layers)-1]
	if _, owned := top.saved[nodeName]; owned {
		return cur, nil
	}
	top.saved[nodeName] = cur
	clone := cur.SnapshotConcrete()
	s.nodes[nodeName] = clone
	s.replaceInList(nodeName, clone)
	if hasAffinityPods(cur) {
		s.affinityListsAreValid = false // the lists point at the old object
	}
	return clone, nil
}

// replace swaps the NodeInfo of an existing node.
func (s *ClusterSnapshot) replace(nodeName string, info *schedframework.NodeInfo) {
	s.save(nodeName)
	s.nodes[nodeName] = info
	s.replaceInList(nodeName, info)
}

func (s *ClusterSnapshot) replaceInList(nodeName string, info *schedframework.NodeInfo) {
	if !s.listValid {
		return
	}
	if i := s.findInList(nodeName); i >= 0 {
		s.list[i] = info
	} else {
		s.listValid = false
	}
}

// findInList returns the position of nodeName in the valid list, or -1.
func (s *ClusterSnapshot) findInList(nodeName string) int {
	if i, found := s.listIndex[nodeName]; found && i < len(s.list) && s.list[i].Node().Name == nodeName {
		return i
	}
	i, found := slices.BinarySearchFunc(s.list, nodeName, func(ni fwk.NodeInfo, name string) int {
		return strings.Compare(ni.Node().Name, name)
	})
	if !found {
		return -1
	}
	s.listIndex[nodeName] = i
	return i
}

// removeFromList drops a node from the list in place (what is left is
// still sorted, as a rebuild would be).
func (s *ClusterSnapshot) removeFromList(nodeName string) {
	if !s.listValid {
		return
	}
	i := s.findInList(nodeName)
	if i < 0 {
		s.listValid = false
		return
	}
	s.list = slices.Delete(s.list, i, i+1)
	delete(s.listIndex, nodeName)
}

// insertInList puts a node into the sorted list at its place (a node
// added, or a removal reverted).
func (s *ClusterSnapshot) insertInList(nodeName string, info *schedframework.NodeInfo) {
	if !s.listValid {
		return
	}
	i, found := slices.BinarySearchFunc(s.list, nodeName, func(ni fwk.NodeInfo, name string) int {
		return strings.Compare(ni.Node().Name, name)
	})
	if found {
		s.list[i] = info
	} else {
		s.list = slices.Insert(s.list, i, fwk.NodeInfo(info))
	}
	s.listIndex[nodeName] = i
}

// touched invalidates the derived lists after a node went from old to cur.
func (s *ClusterSnapshot) touched(old, cur *schedframework.NodeInfo) {
	if hasAffinityPods(old) || hasAffinityPods(cur) {
		s.affinityListsAreValid = false
	}
}

func (s *ClusterSnapshot) invalidateAll() {
	s.listValid = false
	s.affinityListsAreValid = false
}

func (s *ClusterSnapshot) nodeList() []fwk.NodeInfo {
	if s.listValid {
		return s.list
	}
	names := slices.Sorted(maps.Keys(s.nodes))
	s.list = make([]fwk.NodeInfo, len(names))
	s.listIndex = make(map[string]int, len(names))
	for i, name := range names {
		s.list[i] = s.nodes[name]
		s.listIndex[name] = i
	}
	s.listValid = true
	return s.list
}

func (s *ClusterSnapshot) affinityLists() (withAffinity, withAntiAffinity, nonHostAnti []fwk.NodeInfo) {
	if !s.affinityListsAreValid {
		s.affinityList, s.antiAffinityList, s.nonHostAntiAffinity = nil, nil, nil
		for _, n := range s.nodeList() {
			if len(n.GetPodsWithAffinity()) > 0 {
				s.affinityList = append(s.affinityList, n)
			}
			if len(n.GetPodsWithRequiredAntiAffinity()) > 0 {
				s.antiAffinityList = append(s.antiAffinityList, n)
			}
			if len(n.GetPodsWithRequiredNonHostScopedAntiAffinity()) > 0 {
				s.nonHostAntiAffinity = append(s.nonHostAntiAffinity, n)
			}
		}
		s.affinityListsAreValid = true
	}
	return s.affinityList, s.antiAffinityList, s.nonHostAntiAffinity
}

// prepareForScheduling builds every lazily computed list so that the
// framework's (possibly parallel) plugins only ever read the snapshot.
func (s *ClusterSnapshot) prepareForScheduling() {
	s.nodeList()
	s.affinityLists()
}

// isPVCUsedByPods answers the scheduler's StorageInfoLister question. It
// scans all nodes; only pods with ReadWriteOncePod claims ask it.
func (s *ClusterSnapshot) isPVCUsedByPods(key string) bool {
	for _, info := range s.nodes {
		if info.PVCRefCounts[key] > 0 {
			return true
		}
	}
	return false
}

func hasAffinityPods(info *schedframework.NodeInfo) bool {
	return info != nil && len(info.PodsWithAffinity) > 0
}

func newPodInfo(p *apiv1.Pod) *schedframework.PodInfo {
	// A parse error in affinity terms is what the scheduler tolerates too:
	// the PodInfo still carries the pod and the terms that did parse.
	pi, err := schedframework.NewPodInfo(p)
	if err != nil {
		klog.V(4).InfoS("Snapshot: pod has affinity terms the scheduler cannot parse", "pod", klog.KObj(p), "err", err)
	}
	return pi
}

func (s *ClusterSnapshot) toNodeInfo(info *schedframework.NodeInfo) *framework.NodeInfo {
	pods := make([]*apiv1.Pod, 0, len(info.Pods))
	for _, pi := range info.Pods {
		pods = append(pods, pi.GetPod())
	}
	ni := framework.NewNodeInfo(info.Node(), pods...)
	if sl := s.dra.NodeSlices(info.Node().Name); len(sl) > 0 {
		ni.SetResourceSlices(sl)
	}
	return ni
}

func isTerminal(p *apiv1.Pod) bool {
	return p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed
}
