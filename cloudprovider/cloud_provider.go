// Package cloudprovider holds the contract between the autoscaling core and a
// cloud. Its method set and meaning follow upstream cluster-autoscaler, so a
// provider author recognises every method; the implementation is our own.
//
// A provider imports only this package, config and simulator/framework (its
// node templates are framework.NodeInfo): never core, clusterstate or the
// scheduler simulation, so a provider builds without the autoscaling logic.
package cloudprovider

import (
	"errors"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// ErrNotImplemented is returned by optional methods a provider does not support.
var ErrNotImplemented = errors.New("not implemented")

// ErrAlreadyExist is returned by NodeGroup.Create when the group already exists.
var ErrAlreadyExist = errors.New("already exist")

// CloudProvider gives the core access to the cloud's node groups.
type CloudProvider interface {
	// Name returns the provider's name, e.g. "digitalocean".
	Name() string
	// NodeGroups returns every node group the autoscaler may resize.
	NodeGroups() []NodeGroup
	// NodeGroupForNode returns the group of a node, or nil (and no error)
	// when the node is not autoscaled.
	NodeGroupForNode(*apiv1.Node) (NodeGroup, error)
	// HasInstance reports whether the node still has a cloud instance
	// behind it.
	HasInstance(*apiv1.Node) (bool, error)
	// Pricing returns the pricing model, or ErrNotImplemented.
	Pricing() (PricingModel, error)
	// GetAvailableMachineTypes lists the machine types node groups can use.
	GetAvailableMachineTypes() ([]string, error)
	// NewNodeGroup builds a not-yet-existing group (autoprovisioning).
	NewNodeGroup(machineType string, labels map[string]string, systemLabels map[string]string,
		taints []apiv1.Taint, extraResources map[string]resource.Quantity) (NodeGroup, error)
	// GetResourceLimiter returns the cluster-wide resource limits.
	GetResourceLimiter() (*ResourceLimiter, error)
	// GPULabel is the node label that marks GPU nodes.
	GPULabel() string
	// GetAvailableGPUTypes lists the GPU types the cloud offers.
	GetAvailableGPUTypes() map[string]struct{}
	// GetNodeGpuConfig describes the GPU of a node, or nil for none.
	GetNodeGpuConfig(*apiv1.Node) *GpuConfig
	// Cleanup releases resources before the process exits.
	Cleanup() error
	// Refresh is called once at the start of every iteration, before any
	// other method, to bring cached cloud state up to date.
	Refresh() error
}

// NodeGroup is a set of identical nodes the cloud can grow or shrink.
type NodeGroup interface {
	MaxSize() int
	MinSize() int
	// TargetSize is the size the cloud is asked to have, which may differ
	// from the number of registered nodes while nodes come and go.
	TargetSize() (int, error)
	// IncreaseSize raises the target by delta (> 0), never above MaxSize.
	IncreaseSize(delta int) error
	// AtomicIncreaseSize is IncreaseSize that either adds all nodes or none.
	AtomicIncreaseSize(delta int) error
	// DeleteNodes removes the given nodes from the group and decreases the
	// target accordingly.
	DeleteNodes([]*apiv1.Node) error
	// ForceDeleteNodes deletes nodes even below MinSize.
	ForceDeleteNodes([]*apiv1.Node) error
	// DecreaseTargetSize lowers the target by -delta (delta < 0) without
	// deleting registered nodes; used to give up on nodes that never came.
	DecreaseTargetSize(delta int) error
	Id() string
	Debug() string
	// Nodes lists the group's instances with their cloud-side state.
	Nodes() ([]Instance, error)
	// TemplateNodeInfo describes a new node of this group, so the core can
	// scale up from zero.
	TemplateNodeInfo() (*framework.NodeInfo, error)
	Exist() bool
	Create() (NodeGroup, error)
	Delete() error
	Autoprovisioned() bool
	// GetOptions returns per-group overrides of the autoscaling options, or
	// ErrNotImplemented to use the defaults.
	GetOptions(defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error)
}

// Instance is a cloud machine that belongs (or will belong) to a node group.
type Instance struct {
	// Id is the provider ID the Node will carry in spec.providerID.
	Id     string
	Status *InstanceStatus
}

// InstanceStatus is an instance's cloud-side state.
type InstanceStatus struct {
	State     InstanceState
	ErrorInfo *InstanceErrorInfo
}

// InstanceState is the lifecycle phase of an instance.
type InstanceState int

const (
	// InstanceRunning means the instance is up.
	InstanceRunning InstanceState = 1
	// InstanceCreating means the instance is being created.
	InstanceCreating InstanceState = 2
	// InstanceDeleting means the instance is being deleted.
	InstanceDeleting InstanceState = 3
)

func (s InstanceState) String() string {
	switch s {
	case InstanceRunning:
		return "running"
	case InstanceCreating:
		return "creating"
	case InstanceDeleting:
		return "deleting"
	}
	return "unknown"
}

// InstanceErrorClass classifies an instance failure.
type InstanceErrorClass int

const (
	// OutOfResourcesErrorClass means the cloud ran out of capacity or quota.
	OutOfResourcesErrorClass InstanceErrorClass = 1
	// OtherErrorClass is any other failure.
	OtherErrorClass InstanceErrorClass = 99
)

// InstanceErrorInfo explains why an instance is in error.
type InstanceErrorInfo struct {
	ErrorClass   InstanceErrorClass
	ErrorCode    string
	ErrorMessage string
}

// PricingModel prices nodes and pods over a time range.
type PricingModel interface {
	NodePrice(node *apiv1.Node, startTime time.Time, endTime time.Time) (float64, error)
	PodPrice(pod *apiv1.Pod, startTime time.Time, endTime time.Time) (float64, error)
}

// GpuConfig describes the GPU of a node.
type GpuConfig struct {
	Label                string
	Type                 string
	ExtendedResourceName apiv1.ResourceName
}

// FakeNodeReasonAnnotation marks a placeholder Node the core builds for an
// instance that has no Node object (it never registered, or failed to
// create), so that it can ask the provider to delete that instance. Its value
// says why (FakeNodeUnregistered, FakeNodeCreateError). The key is upstream's.
const FakeNodeReasonAnnotation = "k8s.io/cluster-autoscaler-fake-node-reason"

// Reasons for FakeNodeReasonAnnotation.
const (
	FakeNodeUnregistered = "unregistered"
	FakeNodeCreateError  = "create-error"
)

// ProblemReporter is optionally implemented by a CloudProvider that can
// notice, in a Refresh, a problem only the operator can fix (an API token
// missing a scope, say). The core shows each problem in the status
// ConfigMap's message and records an event when it first appears.
type ProblemReporter interface {
	// Problems found by the last Refresh, each a sentence for the
	// operator; none when all is well.
	Problems() []string
}

// DeletingInstancesReporter is optionally implemented by a CloudProvider
// whose last Refresh may list instances being deleted outside its node
// groups: the nodes of a node group being deleted, which is no node group
// any more. At start-up the core keeps the ToBeDeletedByClusterAutoscaler
// taint on their nodes, as on its groups' instances in InstanceDeleting.
type DeletingInstancesReporter interface {
	// DeletingInstances are the provider IDs of every instance the last
	// Refresh listed as being deleted.
	DeletingInstances() map[string]bool
}

// GPULabels returns the gpu_resource_name and gpu_name labels of the
// scale-up and scale-down metrics for a node: its GPU's extended resource
// and type, or empty strings for a node without a GPU.
func GPULabels(p CloudProvider, n *apiv1.Node) (resourceName, gpuType string) {
	if gpu := p.GetNodeGpuConfig(n); gpu != nil {
		return string(gpu.ExtendedResourceName), gpu.Type
	}
	return "", ""
}

// HourlyCostLimiter is optionally implemented by a NodeGroup whose nodes
// together may cost no more than a limit an hour (USD): a DOKS pool's
// k8s-cluster-autoscaler-max-hourly-cost tag, or the autoprovisioning
// config's max_hourly_cost for the pools it creates. 0 means none. The
// core's resourcequotas package checks it (Tracker.GroupRoom).
type HourlyCostLimiter interface {
	MaxHourlyCost() float64
}

// InstanceQuota is the account's limit on instances (DigitalOcean's
// droplet_limit) as last read, and what is left of it now.
type InstanceQuota struct {
	// Limit is the account's limit; Instances its instances now (those
	// counted at ReadAt, corrected by the changes the provider has listed
	// since); Headroom = Limit − Instances, never below 0.
	Limit, Instances, Headroom int
	ReadAt                     time.Time
}

// InstanceQuotaReporter is optionally implemented by a CloudProvider that
// can read the account's instance limit. known is false when it cannot
// (a token without the scope, the API down): then only the cloud's
// refusals (AccountLimitError) say the limit is reached.
type InstanceQuotaReporter interface {
	InstanceQuota() (q InstanceQuota, known bool)
}

// MachineTypeOrderer is optionally implemented by a CloudProvider whose
// GetAvailableMachineTypes may list the sizes in the operator's order of
// preference rather than cheapest first (DigitalOcean's
// autoprovisioning.size_preference): when MachineTypesByPreference is true,
// node autoprovisioning creates the first listed size whose pool helps,
// not the cheapest per pod.
type MachineTypeOrderer interface {
	MachineTypesByPreference() bool
}

// AvailabilityReporter is optionally implemented by a NodeGroup whose
// machine type may be unavailable for a while (SizeUnavailableError):
// Unavailable says why it cannot grow now, "" when it can. The scale-up
// planner skips such a group and takes the next option in the same loop.
type AvailabilityReporter interface {
	Unavailable() string
}

// ProvisionTimeoutLearner is optionally implemented by a NodeGroup whose
// provider learns from nodes that never registered: the core calls
// NodesNeverCame when it gives up on the group's nodes after
// --max-node-provision-time, and the provider may hold the group's machine
// type unavailable, for every group of that type.
type ProvisionTimeoutLearner interface {
	NodesNeverCame()
}
