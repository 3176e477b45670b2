package scaledown

import (
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
)

// What scale-down did, as values: the planner, ScaleDown and the actuator
// return or report these, and the reporter (core/report) turns them into
// events, metrics and registry updates. Nothing here records.

// Candidates is what one planner update found.
type Candidates struct {
	// ByGroup counts the unneeded nodes per node group (the status
	// ConfigMap's scale-down candidates).
	ByGroup map[string]int
	// Unneeded counts them all.
	Unneeded int
	// Took is how long finding them took, also when the update failed.
	Took time.Duration
}

// SoftTaintResult says what one pass of soft tainting did.
type SoftTaintResult struct {
	Tainted, Untainted []string
	// Skipped counts the nodes left for a later pass (budget spent).
	Skipped int
	Errors  []error
	// Took is how long the pass took.
	Took time.Duration
}

// DeletionCostResult is what one pass over the pods' deletion costs did
// (--pod-deletion-cost-on-unneeded-nodes): the pods (namespace/name) given
// the cost and those it was taken off.
type DeletionCostResult struct {
	Marked, Unmarked []string
	// Skipped counts the pods left for a later pass: budget spent, or the
	// pod changed since it was read.
	Skipped int
	Errors  []error
}

// FailureKind says which part of a removal failed; the reporter maps it to
// the errors_total type.
type FailureKind int

const (
	// FailedAPICall: a Kubernetes API call (taint, pod list, eviction).
	FailedAPICall FailureKind = iota
	// FailedCloudProvider: the provider's DeleteNodes.
	FailedCloudProvider
	// FailedInternal: the removal was cut short (shutdown) or could not
	// read what it needed.
	FailedInternal
	// FailedTransient: a pod that blocks the drain arrived since the plan.
	FailedTransient
)

// RemovalStart is a batch of removals starting: for empty nodes, before
// they are tainted; for nodes to drain, once tainted (only those).
type RemovalStart struct {
	Nodes []*UnneededNode
	Drain bool
}

// RemovalFailure is a removal that failed and whose node was given back
// (its taints removed, or an attempt made).
type RemovalFailure struct {
	Node *apiv1.Node
	Kind FailureKind
	Err  error
}

// Evictions counts the evictions of one drain (or drain priority group).
type Evictions struct {
	Succeeded, Failed int
}

// Outcomes hears each step of the removals as it happens. Removals run in
// goroutines of their own and end after the loop that started them has
// moved on, so their steps are reported by call, from the goroutine that
// took the step, at the moment it took it: the records keep the order and
// timing they had when the actuator made them itself, and a removal ending
// during a later loop is recorded when it ends, not when some loop next
// collects it. Implementations must be safe for concurrent use.
type Outcomes interface {
	RemovalsStarted(RemovalStart)
	// NodeTainted: ToBeDeletedByClusterAutoscaler is on the node.
	NodeTainted(*apiv1.Node)
	// PodEvicted: the Eviction API accepted a pod's eviction.
	PodEvicted(*apiv1.Pod)
	// EvictionsEnded: the evictions of a drain step were answered.
	EvictionsEnded(Evictions)
	RemovalFailed(RemovalFailure)
	// NodeRemoved: the provider deleted the node (or started to).
	NodeRemoved(*UnneededNode)
}

// Skipped is a removal a cluster-wide minimum prevented.
type Skipped struct {
	Node    string
	Minimum resourcequotas.Resource
}
