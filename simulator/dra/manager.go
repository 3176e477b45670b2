package dra

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// Manager is the scheduler framework's SharedDRAManager for a simulation.
// The framework is built once and keeps its manager, while the snapshot it
// should read changes from call to call: current says which one it is.
//
// In the scheduler, an allocation made in Reserve stays "pending" until
// PreBind writes it to the API. The simulation has no binding phase: the
// allocation is stored in the snapshot's claim at once, so the next pod
// sees the device as taken, and a pod sharing the claim sees it allocated.
type Manager struct {
	current func() *Snapshot
}

var _ fwk.SharedDRAManager = &Manager{}

// NewManager returns a manager reading the snapshot current returns.
func NewManager(current func() *Snapshot) *Manager {
	return &Manager{current: current}
}

func (m *Manager) snap() *Snapshot {
	if s := m.current(); s != nil {
		return s
	}
	return emptySnapshot
}

// emptySnapshot answers while no snapshot is set: it is never changed, as
// the plugin writes only through Reserve, after a PreFilter that found
// claims in it (it has none).
var emptySnapshot = NewSnapshot(nil, nil, nil)

// ResourceClaims serves the claims and records allocations.
func (m *Manager) ResourceClaims() fwk.ResourceClaimTracker { return claimTracker{m} }

// ResourceSlices serves the slices.
func (m *Manager) ResourceSlices() fwk.ResourceSliceLister { return sliceLister{m} }

// DeviceClasses serves the device classes.
func (m *Manager) DeviceClasses() fwk.DeviceClassLister { return classLister{m} }

// DeviceClassResolver maps extended resource names to device classes.
func (m *Manager) DeviceClassResolver() fwk.DeviceClassResolver { return classResolver{m} }

type sliceLister struct{ m *Manager }

// ListWithDeviceTaintRules returns the slices as published: the simulation
// does not read DeviceTaintRules, so only taints a driver put on its devices
// apply.
func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return l.m.snap().slices(), nil
}

type classLister struct{ m *Manager }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	return l.m.snap().Classes(), nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c := l.m.snap().Class(name); c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

type classResolver struct{ m *Manager }

// GetDeviceClass returns the class a pod's extended resource request is
// served from (see Snapshot.ExtendedResourceClass); nil when none, so that
// device-plugin resources stay with NodeResourcesFit.
func (r classResolver) GetDeviceClass(name apiv1.ResourceName) *resourceapi.DeviceClass {
	return r.m.snap().ExtendedResourceClass(name)
}

type claimTracker struct{ m *Manager }

func (t claimTracker) List() ([]*resourceapi.ResourceClaim, error) {
	return t.m.snap().Claims(), nil
}

func (t claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c := t.m.snap().Claim(namespace, name); c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// ListAllAllocatedDevices lists the devices allocated to some claim,
// except those allocated with admin access (they do not take the device).
// The plugin asks for it when consumable capacity is off.
func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	out := sets.New[structured.DeviceID]()
	for _, c := range t.m.snap().claims {
		// Without consumable capacity, a share takes the whole device.
		take := func(r *resourceapi.DeviceRequestAllocationResult) {
			out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
		forEachAllocatedDevice(c, take, take)
	}
	return out, nil
}

// GatherAllocatedState is ListAllAllocatedDevices plus, for devices with
// consumable capacity, the shares handed out and the capacity they take.
func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	st := &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range t.m.snap().claims {
		forEachAllocatedDevice(c, func(r *resourceapi.DeviceRequestAllocationResult) {
			st.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}, func(r *resourceapi.DeviceRequestAllocationResult) {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			st.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				st.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		})
	}
	return st, nil
}

// forEachAllocatedDevice calls dedicated for each device the claim holds
// alone and shared for each share of a device with consumable capacity.
// Admin-access results hold nothing.
func forEachAllocatedDevice(c *resourceapi.ResourceClaim, dedicated, shared func(*resourceapi.DeviceRequestAllocationResult)) {
	if c.Status.Allocation == nil {
		return
	}
	for i := range c.Status.Allocation.Devices.Results {
		r := &c.Status.Allocation.Devices.Results[i]
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		if r.ShareID != nil {
			shared(r)
		} else {
			dedicated(r)
		}
	}
}

// SignalClaimPendingAllocation stores the allocated claim in the snapshot.
// The claim the plugin made in memory for a pod's extended resources is
// stored as the scheduler's PreBind would create it (see
// SimulatedExtendedClaimName).
func (t claimTracker) SignalClaimPendingAllocation(uid types.UID, allocated *resourceapi.ResourceClaim) error {
	s := t.m.snap()
	if s == emptySnapshot {
		return fmt.Errorf("no DRA snapshot to record the allocation of claim %s/%s in", allocated.Namespace, allocated.Name)
	}
	cur := s.Claim(allocated.Namespace, allocated.Name)
	if cur == nil && IsExtendedResourceClaim(allocated) && s.storeExtendedClaim(allocated) {
		return nil
	}
	if cur == nil || cur.UID != uid {
		return fmt.Errorf("claim %s/%s (uid %s) is not in the snapshot", allocated.Namespace, allocated.Name, uid)
	}
	s.SetClaim(allocated)
	return nil
}

// GetPendingAllocation returns nil: nothing is ever pending in a simulation.
func (t claimTracker) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

// MaybeRemoveClaimPendingAllocation returns false: nothing is ever pending.
func (t claimTracker) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

// AssumeClaimAfterAPICall stores the claim (the simulation makes no API
// calls; the plugin calls this only in PreBind, which is not run).
func (t claimTracker) AssumeClaimAfterAPICall(c *resourceapi.ResourceClaim) error {
	s := t.m.snap()
	if s == emptySnapshot {
		return fmt.Errorf("no DRA snapshot to record claim %s/%s in", c.Namespace, c.Name)
	}
	s.SetClaim(c)
	return nil
}

// AssumedClaimRestore does nothing: the snapshot's Revert undoes simulated
// changes.
func (t claimTracker) AssumedClaimRestore(string, string) {}
