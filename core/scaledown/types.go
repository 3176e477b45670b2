// Package scaledown finds nodes the cluster no longer needs and removes
// them. The work is split as upstream splits it:
//   - planner/ finds the unneeded nodes and why the others stay;
//   - choose (here) picks, as a pure function, the unneeded nodes whose
//     removal starts now, and why the others wait;
//   - actuation/ taints, drains and deletes;
//   - deletiontracker/ owns the removals in flight and reports their end;
//   - budgets/ bounds how many removals start per loop.
//
// ScaleDown (here) ties them together behind the small interfaces below,
// keeps the cooldowns and executes choose's plan. None of them records:
// the planner and ScaleDown return what they found and did, the actuator
// reports each removal step to Outcomes (outcomes.go), and core/report
// turns both into events, metrics and registry updates. The subpackages
// import this one for its types; core wires the implementations.
package scaledown

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// ScaleDownDisabledAnnotation on a node keeps the autoscaler from removing it.
const ScaleDownDisabledAnnotation = drain.ScaleDownDisabledKey

// UnneededNode is a node the planner found unneeded.
type UnneededNode struct {
	Node    *apiv1.Node
	GroupID string
	// Since is when it was first seen unneeded (continuously since).
	Since time.Time
	// Empty: only DaemonSet and mirror pods run on it.
	Empty bool
	// Unready: removed because it has been unready, not underutilized.
	Unready bool
	// PodsToEvict is what must be evicted to empty it.
	PodsToEvict []*apiv1.Pod
	Utilization utilization.Info
	// DRADrivers is the node's dra_drivers metric label (dra.DriversLabel).
	DRADrivers string
}

// PlannerInput is the cluster as the planner sees it.
type PlannerInput struct {
	// Snapshot returns the registered nodes and their pods (plus pending
	// pods that fit existing nodes), building it on first use: when no node
	// passes the cheap filters, no snapshot is needed. The planner forks and
	// reverts it.
	Snapshot func() (*simulator.ClusterSnapshot, error)
	// PodsByNode are the pods bound to each node.
	PodsByNode map[string][]*apiv1.Pod
	Nodes      []*apiv1.Node
	PDBs       []*policyv1.PodDisruptionBudget
	// BeingDeleted are the nodes being removed.
	BeingDeleted map[string]bool
	// Held are the nodes another phase holds (node name to phase: a
	// consolidation command in flight): neither removed nor a place for
	// the pods of nodes that are.
	Held map[string]string
	// Planned are the pods consolidation's held command would evict, by
	// node (consolidation.Phase.PlannedPods): with
	// --pod-deletion-cost-on-unneeded-nodes they get the deletion cost of
	// an unneeded node's pods.
	Planned map[string][]*apiv1.Pod
	// Quotas counts the live nodes against the cluster-wide minimums.
	Quotas resourcequotas.Tracker
	Now    time.Time
	// DRA: the cluster's ResourceSlices and ResourceClaims, for the
	// utilization of nodes that publish devices (nil: none).
	DRA *dra.Snapshot
}

// Planner finds the unneeded nodes (planner.Planner).
type Planner interface {
	// Update recomputes the unneeded nodes from in and returns what it
	// found, for the reporter; it records nothing itself.
	Update(in PlannerInput) (Candidates, error)
	// Unneeded returns them, empty ones first, then the longest unneeded.
	Unneeded() []*UnneededNode
	// Forget drops a node whose removal started.
	Forget(name string)
	// RecordUnremovable notes why an unneeded node is not removed now.
	RecordUnremovable(name string, reason simulator.UnremovableReason)
	// UnremovableCounts counts this loop's unremovable nodes by the
	// unremovable_nodes_count reason label.
	UnremovableCounts() map[string]int
}

// Actuator removes nodes (actuation.Actuator).
type Actuator interface {
	// DeleteEmpty removes empty nodes in bulk.
	DeleteEmpty(ctx context.Context, nodes []*UnneededNode)
	// Drain evicts the nodes' pods, then deletes them.
	Drain(ctx context.Context, nodes []*UnneededNode)
	// SoftTaint puts the PreferNoSchedule DeletionCandidate taint on the
	// unneeded nodes and takes it off the needed ones, within its budget,
	// and says what it did.
	SoftTaint(ctx context.Context, unneeded, needed []*apiv1.Node) SoftTaintResult
	// DeletionCosts gives the pods of mark the deletion cost of a pod on
	// an unneeded node and takes it off the pods of unmark, within its
	// budget, and says what it did.
	DeletionCosts(ctx context.Context, mark []PodOnNode, unmark []*apiv1.Pod) DeletionCostResult
}

// Removals says which removals are in flight (deletiontracker.Tracker).
type Removals interface {
	InFlight() (removals, drains int)
	DeletingInGroup(id string) int
	BeingDeleted() map[string]bool
}

// DescribeBlocking renders why a pod keeps its node, for operators.
func DescribeBlocking(bp *drain.BlockingPod) string {
	name := bp.Pod.Namespace + "/" + bp.Pod.Name
	var why string
	switch bp.Reason {
	case drain.NotSafeToEvictAnnotation:
		why = "has " + drain.SafeToEvictKey + "=false"
	case drain.NotEnoughPdb:
		why = "its PodDisruptionBudget allows no disruption now"
	case drain.LocalStorageRequested:
		why = "uses local storage (emptyDir or hostPath; --skip-nodes-with-local-storage)"
	case drain.NotReplicated:
		why = "has no controller that would recreate it"
	case drain.UnmovableKubeSystemPod:
		why = "is a kube-system pod without a PodDisruptionBudget (--skip-nodes-with-system-pods)"
	case drain.ControllerNotFound:
		why = "its controller no longer exists"
	case drain.MinReplicasReached:
		why = "its controller has fewer replicas than --min-replica-count"
	default:
		why = bp.Reason.String()
	}
	return fmt.Sprintf("pod %s: %s", name, why)
}

// ResourceLabel names the resource a utilization was judged by.
func ResourceLabel(u utilization.Info) string {
	if u.ResourceName != "" {
		return string(u.ResourceName)
	}
	return "cpu/memory"
}
