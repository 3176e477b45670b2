package clusterstate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
)

func nodeCount(rd Readiness) api.NodeCount {
	return api.NodeCount{
		Registered: api.RegisteredNodeCount{
			Total:        rd.Registered,
			Ready:        rd.Ready,
			NotStarted:   rd.NotStarted,
			BeingDeleted: rd.BeingDeleted,
			Unready:      api.RegisteredUnreadyNodeCount{Total: rd.Unready, ResourceUnready: rd.ResourceUnready},
		},
		LongUnregistered: rd.LongUnregistered,
		Unregistered:     rd.Unregistered,
	}
}

// GetStatus builds the status published in the status ConfigMap, in
// upstream's format, with autoscalerStatus Running.
func (r *Registry) GetStatus(now time.Time) *api.ClusterAutoscalerStatus {
	probe := metav1.NewTime(now)
	used := map[string]bool{}
	tt := func(key, status string) metav1.Time {
		used[key] = true
		return metav1.NewTime(r.setCondition(key, status, now))
	}

	st := &api.ClusterAutoscalerStatus{
		Time:             api.FormatTime(now),
		AutoscalerStatus: api.ClusterAutoscalerRunning,
		Message:          r.message,
		Consolidation:    r.consolidation,
		Limits:           r.limits,
	}

	health := api.ClusterHealthy
	if !r.healthy {
		health = api.ClusterUnhealthy
	}
	st.ClusterWide.Health = api.ClusterHealthCondition{
		Status: health, NodeCounts: nodeCount(r.total), LastProbeTime: probe,
		LastTransitionTime: tt("cluster/health", string(health)),
	}
	up := api.ClusterScaleUpNoActivity
	if len(r.requests) > 0 {
		up = api.ClusterScaleUpInProgress
	}
	st.ClusterWide.ScaleUp = api.ClusterScaleUpCondition{
		Status: up, LastProbeTime: probe, LastTransitionTime: tt("cluster/scaleUp", string(up)),
	}
	totalCandidates := 0
	for _, n := range r.candidates {
		totalCandidates += n
	}
	st.ClusterWide.ScaleDown = scaleDownCondition(totalCandidates, probe, tt, "cluster/scaleDown")

	for _, id := range r.sortedGroupIDs() {
		gs := r.groups[id]
		gh := api.NodeGroupHealthy
		if !gs.Healthy {
			gh = api.NodeGroupUnhealthy
		}
		ng := api.NodeGroupStatus{Name: id, Autoprovisioned: gs.Group.Autoprovisioned()}
		ng.Health = api.NodeGroupHealthCondition{
			Status: gh, NodeCounts: nodeCount(gs.Readiness), CloudProviderTarget: gs.Target,
			MinSize: gs.Group.MinSize(), MaxSize: gs.Group.MaxSize(), LastProbeTime: probe,
			LastTransitionTime: tt("group/"+id+"/health", string(gh)),
		}
		su := api.NodeGroupScaleUpNoActivity
		var bi api.BackoffInfo
		if off, info, _ := r.BackedOff(id, now); off {
			su = api.NodeGroupScaleUpBackoff
			bi = api.BackoffInfo{ErrorCode: info.ErrorCode, ErrorMessage: info.ErrorMessage}
		} else if _, ok := r.requests[id]; ok {
			su = api.NodeGroupScaleUpInProgress
		} else if !gs.Healthy {
			su = api.NodeGroupScaleUpUnhealthy
		}
		ng.ScaleUp = api.NodeGroupScaleUpCondition{
			Status: su, BackoffInfo: bi, LastProbeTime: probe,
			LastTransitionTime: tt("group/"+id+"/scaleUp", string(su)),
		}
		ng.ScaleDown = scaleDownCondition(r.candidates[id], probe, tt, "group/"+id+"/scaleDown")
		st.NodeGroups = append(st.NodeGroups, ng)
	}
	// Forget transitions of groups that are gone.
	for key := range r.conditions {
		if !used[key] {
			delete(r.conditions, key)
		}
	}
	return st
}

func scaleDownCondition(candidates int, probe metav1.Time, tt func(string, string) metav1.Time, key string) api.ScaleDownCondition {
	s := api.ScaleDownNoCandidates
	if candidates > 0 {
		s = api.ScaleDownCandidatesPresent
	}
	return api.ScaleDownCondition{Status: s, Candidates: candidates, LastProbeTime: probe, LastTransitionTime: tt(key, string(s))}
}

// InitializingStatus is the status written at start-up, before the first
// iteration.
func InitializingStatus(now time.Time, message string) *api.ClusterAutoscalerStatus {
	probe := metav1.NewTime(now)
	return &api.ClusterAutoscalerStatus{
		Time:             api.FormatTime(now),
		AutoscalerStatus: api.ClusterAutoscalerInitializing,
		Message:          message,
		ClusterWide: api.ClusterWideStatus{
			Health:    api.ClusterHealthCondition{Status: api.ClusterHealthy, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleUp:   api.ClusterScaleUpCondition{Status: api.ClusterScaleUpNoActivity, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleDown: api.ScaleDownCondition{Status: api.ScaleDownNoCandidates, LastProbeTime: probe, LastTransitionTime: probe},
		},
	}
}
