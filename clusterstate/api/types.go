// Package api holds the Go types of the status the autoscaler publishes in the
// cluster-autoscaler-status ConfigMap. The JSON field names (and so the YAML a
// user reads with kubectl) match upstream cluster-autoscaler, so tools that
// parse upstream's status keep working.
package api

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusTimeLayout is the layout of ClusterAutoscalerStatus.Time and of the
// ConfigMap's last-updated annotation (upstream's, i.e. time.Time.String()
// without the monotonic clock part).
const StatusTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// FormatTime renders t in StatusTimeLayout.
func FormatTime(t time.Time) string {
	return t.Format(StatusTimeLayout)
}

// ClusterAutoscalerStatusValue is the autoscaler's own state.
type ClusterAutoscalerStatusValue string

const (
	// ClusterAutoscalerInitializing: started, first loop not finished yet.
	ClusterAutoscalerInitializing ClusterAutoscalerStatusValue = "Initializing"
	// ClusterAutoscalerRunning: loops are running.
	ClusterAutoscalerRunning ClusterAutoscalerStatusValue = "Running"
)

// ClusterHealthConditionStatus is the cluster-wide health.
type ClusterHealthConditionStatus string

const (
	// ClusterHealthy: few enough unready nodes to autoscale.
	ClusterHealthy ClusterHealthConditionStatus = "Healthy"
	// ClusterUnhealthy: too many unready nodes; autoscaling is paused.
	ClusterUnhealthy ClusterHealthConditionStatus = "Unhealthy"
)

// ClusterScaleUpConditionStatus is the cluster-wide scale-up state.
type ClusterScaleUpConditionStatus string

const (
	// ClusterScaleUpInProgress: some requested nodes have not registered yet.
	ClusterScaleUpInProgress ClusterScaleUpConditionStatus = "InProgress"
	// ClusterScaleUpNoActivity: nothing pending.
	ClusterScaleUpNoActivity ClusterScaleUpConditionStatus = "NoActivity"
)

// ScaleDownConditionStatus is the scale-down state of the cluster or a group.
type ScaleDownConditionStatus string

const (
	// ScaleDownCandidatesPresent: some nodes are unneeded.
	ScaleDownCandidatesPresent ScaleDownConditionStatus = "CandidatesPresent"
	// ScaleDownNoCandidates: no node is unneeded.
	ScaleDownNoCandidates ScaleDownConditionStatus = "NoCandidates"
)

// NodeGroupHealthConditionStatus is the health of one node group.
type NodeGroupHealthConditionStatus string

const (
	// NodeGroupHealthy: few enough unready nodes in the group.
	NodeGroupHealthy NodeGroupHealthConditionStatus = "Healthy"
	// NodeGroupUnhealthy: too many unready nodes in the group.
	NodeGroupUnhealthy NodeGroupHealthConditionStatus = "Unhealthy"
)

// NodeGroupScaleUpConditionStatus is the scale-up state of one node group.
type NodeGroupScaleUpConditionStatus string

const (
	// NodeGroupScaleUpInProgress: nodes requested, not all registered yet.
	NodeGroupScaleUpInProgress NodeGroupScaleUpConditionStatus = "InProgress"
	// NodeGroupScaleUpUnhealthy: the group is unhealthy, so it is not scaled up.
	NodeGroupScaleUpUnhealthy NodeGroupScaleUpConditionStatus = "Unhealthy"
	// NodeGroupScaleUpBackoff: a scale-up failed recently; the group is skipped.
	NodeGroupScaleUpBackoff NodeGroupScaleUpConditionStatus = "Backoff"
	// NodeGroupScaleUpNoActivity: nothing pending.
	NodeGroupScaleUpNoActivity NodeGroupScaleUpConditionStatus = "NoActivity"
)

// ClusterAutoscalerStatus is what the status ConfigMap's `status` key holds.
type ClusterAutoscalerStatus struct {
	// Time of the write, in StatusTimeLayout.
	Time             string                       `json:"time"`
	AutoscalerStatus ClusterAutoscalerStatusValue `json:"autoscalerStatus"`
	Message          string                       `json:"message,omitempty"`
	ClusterWide      ClusterWideStatus            `json:"clusterWide"`
	NodeGroups       []NodeGroupStatus            `json:"nodeGroups,omitempty"`
	// Consolidation is this project's own section, present only with
	// --consolidation-enabled: upstream's fields above keep their format.
	Consolidation *ConsolidationStatus `json:"consolidation,omitempty"`
	// Limits is this project's own section: what the autoscaled groups
	// cost and the account's droplet quota (docs/limits.md); absent when
	// nothing is priced and no quota is known.
	Limits *LimitsStatus `json:"limits,omitempty"`
}

// LimitsStatus is what buying is bounded by (docs/limits.md).
type LimitsStatus struct {
	// HourlyCost is what the autoscaled groups' nodes cost an hour in
	// USD (each group's target size times its size's price), e.g. "2.52".
	HourlyCost string `json:"hourlyCost,omitempty"`
	// MaxHourlyCost is --max-hourly-cost; absent when there is none.
	MaxHourlyCost string `json:"maxHourlyCost,omitempty"`
	// Unpriced names node groups whose size has no price (give it in the
	// cloud config's price_overrides).
	Unpriced []string `json:"unpriced,omitempty"`
	// DropletQuota is the account's droplet limit as last read.
	DropletQuota *DropletQuotaStatus `json:"dropletQuota,omitempty"`
}

// DropletQuotaStatus is the account's droplet limit and use.
type DropletQuotaStatus struct {
	// Status: Available, or Reached when no droplet can be added.
	Status string `json:"status"`
	// Limit is the account's droplet_limit; Droplets the droplets it has.
	Limit    int `json:"limit"`
	Droplets int `json:"droplets"`
	// ReadAt is when they were read (RFC 3339).
	ReadAt             string `json:"readAt,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// ConsolidationStatus is what consolidation is doing (docs/consolidation.md).
type ConsolidationStatus struct {
	// Status: Idle, OutsideWindow, Waiting (a scale-up is recent or
	// pending), Planned (held for the stabilization window),
	// Provisioning (the replacement is coming), Draining.
	Status string `json:"status"`
	// Command is the command planned or in flight, with its saving.
	Command string `json:"command,omitempty"`
	// Since is when Status began.
	Since string `json:"since,omitempty"`
	// LastResult is the last command that ended, and how.
	LastResult string `json:"lastResult,omitempty"`
	// SavingsPerHour is the hourly saving in USD of the commands that
	// succeeded since the autoscaler started.
	SavingsPerHour string `json:"savingsPerHour"`
}

// ClusterWideStatus is the status of the whole cluster.
type ClusterWideStatus struct {
	Health    ClusterHealthCondition  `json:"health"`
	ScaleUp   ClusterScaleUpCondition `json:"scaleUp"`
	ScaleDown ScaleDownCondition      `json:"scaleDown"`
}

// NodeGroupStatus is the status of one node group (a DOKS node pool).
type NodeGroupStatus struct {
	// Name is the node group's Id(): the DOKS node pool ID.
	Name      string                    `json:"name"`
	Health    NodeGroupHealthCondition  `json:"health"`
	ScaleUp   NodeGroupScaleUpCondition `json:"scaleUp"`
	ScaleDown ScaleDownCondition        `json:"scaleDown"`
	// Autoprovisioned marks a node pool this autoscaler created
	// (--node-autoprovisioning-enabled) and will delete once empty. This
	// project's own field, absent for other pools, so readers of upstream's
	// format see upstream's fields only.
	Autoprovisioned bool `json:"autoprovisioned,omitempty"`
}

// ClusterHealthCondition is the cluster-wide health and node counts.
type ClusterHealthCondition struct {
	Status             ClusterHealthConditionStatus `json:"status"`
	NodeCounts         NodeCount                    `json:"nodeCounts,omitempty"`
	LastProbeTime      metav1.Time                  `json:"lastProbeTime"`
	LastTransitionTime metav1.Time                  `json:"lastTransitionTime"`
}

// NodeGroupHealthCondition is one group's health, counts and sizes.
type NodeGroupHealthCondition struct {
	Status              NodeGroupHealthConditionStatus `json:"status"`
	NodeCounts          NodeCount                      `json:"nodeCounts,omitempty"`
	CloudProviderTarget int                            `json:"cloudProviderTarget"`
	MinSize             int                            `json:"minSize"`
	MaxSize             int                            `json:"maxSize"`
	LastProbeTime       metav1.Time                    `json:"lastProbeTime"`
	LastTransitionTime  metav1.Time                    `json:"lastTransitionTime"`
}

// ClusterScaleUpCondition is the cluster-wide scale-up state.
type ClusterScaleUpCondition struct {
	Status             ClusterScaleUpConditionStatus `json:"status"`
	LastProbeTime      metav1.Time                   `json:"lastProbeTime"`
	LastTransitionTime metav1.Time                   `json:"lastTransitionTime"`
}

// NodeGroupScaleUpCondition is one group's scale-up state. BackoffInfo is
// always rendered (as {} when the group is not backed off), as upstream does.
type NodeGroupScaleUpCondition struct {
	Status             NodeGroupScaleUpConditionStatus `json:"status"`
	BackoffInfo        BackoffInfo                     `json:"backoffInfo"`
	LastProbeTime      metav1.Time                     `json:"lastProbeTime"`
	LastTransitionTime metav1.Time                     `json:"lastTransitionTime"`
}

// BackoffInfo says why a group is backed off.
type BackoffInfo struct {
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ScaleDownCondition is the scale-down state of the cluster or a group.
// Candidates (the number of unneeded nodes) is left out when 0.
type ScaleDownCondition struct {
	Status             ScaleDownConditionStatus `json:"status"`
	Candidates         int                      `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time              `json:"lastProbeTime"`
	LastTransitionTime metav1.Time              `json:"lastTransitionTime"`
}

// NodeCount counts nodes by registration and readiness.
type NodeCount struct {
	Registered       RegisteredNodeCount `json:"registered,omitempty"`
	LongUnregistered int                 `json:"longUnregistered"`
	Unregistered     int                 `json:"unregistered"`
}

// RegisteredNodeCount counts nodes that have a Node object. Suspended is kept
// for shape compatibility with upstream; DOKS nodes are never suspended.
type RegisteredNodeCount struct {
	Total        int                        `json:"total"`
	Ready        int                        `json:"ready"`
	NotStarted   int                        `json:"notStarted"`
	Suspended    int                        `json:"suspended"`
	BeingDeleted int                        `json:"beingDeleted,omitempty"`
	Unready      RegisteredUnreadyNodeCount `json:"unready,omitempty"`
}

// RegisteredUnreadyNodeCount counts unready registered nodes; ResourceUnready
// are those Ready but still missing a resource (e.g. GPUs not yet advertised).
type RegisteredUnreadyNodeCount struct {
	Total           int `json:"total"`
	ResourceUnready int `json:"resourceUnready"`
}
