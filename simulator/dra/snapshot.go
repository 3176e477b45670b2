// Package dra holds the Dynamic Resource Allocation objects a scheduling
// simulation reads and changes: the ResourceSlices that publish devices (per
// node, and cluster-wide ones), the DeviceClasses that select them and the
// ResourceClaims pods make for them. It serves them to the kube-scheduler
// framework's DynamicResources plugin (see Manager), which allocates claims
// with k8s.io/dynamic-resource-allocation's structured allocator exactly as
// the scheduler does; the allocations the plugin makes while the simulation
// places pods are kept here, and Fork/Revert undo them with the rest of the
// simulated state.
//
// Objects are never changed in place: a changed claim is a new copy, so
// objects from the informer caches can be held without copying them.
package dra

import (
	"fmt"
	"maps"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// Snapshot is the DRA state of a simulated cluster. The zero value is not
// usable; see NewSnapshot. A Snapshot is not safe for concurrent use.
type Snapshot struct {
	claims map[claimKey]*resourceapi.ResourceClaim
	// nodeSlices: slices published for one node (spec.nodeName); global:
	// the others (all nodes, a node selector, per-device node selection).
	nodeSlices map[string][]*resourceapi.ResourceSlice
	global     []*resourceapi.ResourceSlice
	classes    map[string]*resourceapi.DeviceClass
	// extended maps extended resource names to the class serving them.
	extended map[apiv1.ResourceName]*resourceapi.DeviceClass

	layers []*layer

	// allSlices caches the list the plugin asks for in every PreFilter.
	allSlices      []*resourceapi.ResourceSlice
	allSlicesValid bool
}

type claimKey struct{ namespace, name string }

// layer remembers, for each claim and node first changed while it was on
// top, the value before (nil: absent).
type layer struct {
	claims     map[claimKey]*resourceapi.ResourceClaim
	nodeSlices map[string][]*resourceapi.ResourceSlice
}

// NewSnapshot returns a snapshot of the given objects. Slices bound to a
// node are kept per node; claims are keyed by namespace and name.
func NewSnapshot(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim, classes []*resourceapi.DeviceClass) *Snapshot {
	s := &Snapshot{
		claims:     make(map[claimKey]*resourceapi.ResourceClaim, len(claims)),
		nodeSlices: map[string][]*resourceapi.ResourceSlice{},
		classes:    make(map[string]*resourceapi.DeviceClass, len(classes)),
	}
	for _, sl := range slices {
		if sl == nil {
			continue
		}
		if n := NodeOf(sl); n != "" {
			s.nodeSlices[n] = append(s.nodeSlices[n], sl)
		} else {
			s.global = append(s.global, sl)
		}
	}
	for _, c := range claims {
		if c != nil {
			s.claims[claimKey{c.Namespace, c.Name}] = c
		}
	}
	for _, c := range classes {
		if c != nil {
			s.classes[c.Name] = c
		}
	}
	s.extended = indexExtendedResources(s.classes)
	return s
}

// NodeOf is the node a slice's devices are local to ("" for slices that are
// not bound to one node).
func NodeOf(sl *resourceapi.ResourceSlice) string {
	if sl.Spec.NodeName != nil {
		return *sl.Spec.NodeName
	}
	return ""
}

// Empty tells a cluster that uses no DRA objects at all.
func (s *Snapshot) Empty() bool {
	return len(s.claims) == 0 && len(s.nodeSlices) == 0 && len(s.global) == 0 && len(s.classes) == 0
}

// Fork starts a layer of changes that Revert drops and Commit keeps.
func (s *Snapshot) Fork() {
	s.layers = append(s.layers, &layer{})
}

// Revert drops the changes made since the matching Fork.
func (s *Snapshot) Revert() {
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	s.layers = s.layers[:len(s.layers)-1]
	for k, old := range top.claims {
		if old == nil {
			delete(s.claims, k)
		} else {
			s.claims[k] = old
		}
	}
	for n, old := range top.nodeSlices {
		if old == nil {
			delete(s.nodeSlices, n)
		} else {
			s.nodeSlices[n] = old
		}
	}
	if len(top.nodeSlices) > 0 {
		s.allSlicesValid = false
	}
}

// Commit folds the changes made since the matching Fork into the layer
// below, so that an outer Revert still drops them.
func (s *Snapshot) Commit() {
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	s.layers = s.layers[:len(s.layers)-1]
	if len(s.layers) == 0 {
		return
	}
	parent := s.layers[len(s.layers)-1]
	for k, old := range top.claims {
		if _, found := parent.claims[k]; !found {
			if parent.claims == nil {
				parent.claims = map[claimKey]*resourceapi.ResourceClaim{}
			}
			parent.claims[k] = old
		}
	}
	for n, old := range top.nodeSlices {
		if _, found := parent.nodeSlices[n]; !found {
			if parent.nodeSlices == nil {
				parent.nodeSlices = map[string][]*resourceapi.ResourceSlice{}
			}
			parent.nodeSlices[n] = old
		}
	}
}

func (s *Snapshot) saveClaim(k claimKey) {
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	if _, found := top.claims[k]; found {
		return
	}
	if top.claims == nil {
		top.claims = map[claimKey]*resourceapi.ResourceClaim{}
	}
	top.claims[k] = s.claims[k]
}

func (s *Snapshot) saveNode(name string) {
	s.allSlicesValid = false
	if len(s.layers) == 0 {
		return
	}
	top := s.layers[len(s.layers)-1]
	if _, found := top.nodeSlices[name]; found {
		return
	}
	if top.nodeSlices == nil {
		top.nodeSlices = map[string][]*resourceapi.ResourceSlice{}
	}
	top.nodeSlices[name] = s.nodeSlices[name]
}

// Claim returns the claim namespace/name, or nil.
func (s *Snapshot) Claim(namespace, name string) *resourceapi.ResourceClaim {
	return s.claims[claimKey{namespace, name}]
}

// SetClaim adds or replaces a claim. The object is stored as given: the
// caller must not change it afterwards.
func (s *Snapshot) SetClaim(c *resourceapi.ResourceClaim) {
	k := claimKey{c.Namespace, c.Name}
	s.saveClaim(k)
	s.claims[k] = c
}

// Claims returns every claim, in no particular order.
func (s *Snapshot) Claims() []*resourceapi.ResourceClaim {
	return slices.Collect(maps.Values(s.claims))
}

// NodeSlices returns the slices local to node name. Callers must not change
// the result.
func (s *Snapshot) NodeSlices(name string) []*resourceapi.ResourceSlice {
	return s.nodeSlices[name]
}

// HasNodeSlices tells whether a driver published devices for node name.
func (s *Snapshot) HasNodeSlices(name string) bool {
	return len(s.nodeSlices[name]) > 0
}

// SetNodeSlices replaces the slices of node name (a simulated node's, or
// none when it leaves).
func (s *Snapshot) SetNodeSlices(name string, sl []*resourceapi.ResourceSlice) {
	if len(sl) == 0 && len(s.nodeSlices[name]) == 0 {
		return
	}
	s.saveNode(name)
	if len(sl) == 0 {
		delete(s.nodeSlices, name)
		return
	}
	s.nodeSlices[name] = slices.Clone(sl)
}

// KeepNodes drops the slices of nodes keep says are not in the cluster
// (nodes being removed, or not registered yet): their devices are not
// there to allocate. It must be called outside of any fork.
func (s *Snapshot) KeepNodes(keep func(string) bool) {
	for n := range s.nodeSlices {
		if !keep(n) {
			delete(s.nodeSlices, n)
			s.allSlicesValid = false
		}
	}
}

// Class returns the DeviceClass name, or nil.
func (s *Snapshot) Class(name string) *resourceapi.DeviceClass { return s.classes[name] }

// Classes returns every DeviceClass, sorted by name.
func (s *Snapshot) Classes() []*resourceapi.DeviceClass {
	out := slices.Collect(maps.Values(s.classes))
	slices.SortFunc(out, func(a, b *resourceapi.DeviceClass) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// slices returns every slice, node-local and global.
func (s *Snapshot) slices() []*resourceapi.ResourceSlice {
	if !s.allSlicesValid {
		s.allSlices = slices.Clone(s.global)
		for _, sl := range s.nodeSlices {
			s.allSlices = append(s.allSlices, sl...)
		}
		s.allSlicesValid = true
	}
	return s.allSlices
}

// PodClaims returns the claims pod references, in the order of its
// spec.resourceClaims, then the claim holding the devices of its extended
// resources (status.extendedResourceClaimStatus). Entries the pod does not
// need (a template claim the controller decided not to create) are skipped;
// a claim that does not exist is an error.
func (s *Snapshot) PodClaims(pod *apiv1.Pod) ([]*resourceapi.ResourceClaim, error) {
	if len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil {
		return nil, nil
	}
	out := make([]*resourceapi.ResourceClaim, 0, len(pod.Spec.ResourceClaims)+1)
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return out, err
		}
		if name == nil {
			continue
		}
		c := s.Claim(pod.Namespace, *name)
		if c == nil {
			return out, fmt.Errorf("pod %s/%s: resource claim %s not found", pod.Namespace, pod.Name, *name)
		}
		out = append(out, c)
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		c := s.Claim(pod.Namespace, st.ResourceClaimName)
		if c == nil {
			return out, fmt.Errorf("pod %s/%s: extended resource claim %s not found", pod.Namespace, pod.Name, st.ResourceClaimName)
		}
		out = append(out, c)
	}
	return out, nil
}

// ReservePodClaims records pod as a consumer of each of its claims (the
// claims' status.reservedFor), as the scheduler does when it binds the pod.
// The DynamicResources plugin's Reserve has already stored the allocations
// it made for the pod's unallocated claims.
func (s *Snapshot) ReservePodClaims(pod *apiv1.Pod) error {
	claims, err := s.PodClaims(pod)
	if err != nil {
		return err
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			return fmt.Errorf("pod %s/%s: resource claim %s is not allocated", pod.Namespace, pod.Name, c.Name)
		}
		if resourceclaim.IsReservedForPod(pod, c, false) {
			continue
		}
		cp := c.DeepCopy()
		cp.Status.ReservedFor = append(cp.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: pod.Name, UID: pod.UID,
		})
		s.SetClaim(cp)
	}
	return nil
}

// UnreservePodClaims removes pod from the consumers of its claims, as its
// deletion would; a claim left with no consumer is deallocated, as the
// resourceclaim controller does (a claim made from a template for the pod
// is deleted, and its replacement starts unallocated: the same for the
// simulation). The claim of the pod's extended resources is deleted, as the
// garbage collector deletes it with its owner: the scheduler makes the
// pod's replacement a new one. Claims that cannot be found are skipped.
func (s *Snapshot) UnreservePodClaims(pod *apiv1.Pod) {
	claims, err := s.PodClaims(pod)
	if err != nil {
		klog.V(4).InfoS("Simulated removal of a pod whose claims are not all known", "pod", klog.KObj(pod), "err", err)
	}
	for _, c := range claims {
		if IsExtendedResourceClaim(c) && ownedByPod(c, pod) {
			s.DeleteClaim(c.Namespace, c.Name)
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(c.Status.ReservedFor), func(r resourceapi.ResourceClaimConsumerReference) bool {
			return r.UID == pod.UID && r.Resource == "pods"
		})
		if len(kept) == len(c.Status.ReservedFor) && (len(kept) > 0 || c.Status.Allocation == nil) {
			continue
		}
		cp := c.DeepCopy()
		cp.Status.ReservedFor = kept
		if len(kept) == 0 {
			cp.Status.Allocation = nil
			cp.Status.Devices = nil
		}
		s.SetClaim(cp)
	}
}
