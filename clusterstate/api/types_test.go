package api

import (
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// A status as upstream cluster-autoscaler writes it must decode into these
// types, so tools written against either read both.
const upstreamStyle = `autoscalerStatus: Running
clusterWide:
  health:
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    nodeCounts:
      longUnregistered: 1
      registered: {notStarted: 0, ready: 3, suspended: 0, total: 4, beingDeleted: 1, unready: {resourceUnready: 0, total: 1}}
      unregistered: 2
    status: Healthy
  scaleDown: {lastProbeTime: "2026-01-02T03:04:05Z", lastTransitionTime: null, status: NoCandidates}
  scaleUp: {lastProbeTime: "2026-01-02T03:04:05Z", lastTransitionTime: null, status: InProgress}
nodeGroups:
- health: {cloudProviderTarget: 3, maxSize: 5, minSize: 1, status: Healthy, lastProbeTime: null, lastTransitionTime: null}
  name: pool-uuid-1
  scaleDown: {candidates: 2, status: CandidatesPresent, lastProbeTime: null, lastTransitionTime: null}
  scaleUp: {backoffInfo: {errorCode: no-code-digitalocean, errorMessage: example}, status: Backoff, lastProbeTime: null, lastTransitionTime: null}
time: 2026-01-02 03:04:05.123 +0000 UTC
`

func TestDecodesUpstreamStatus(t *testing.T) {
	var s ClusterAutoscalerStatus
	if err := yaml.UnmarshalStrict([]byte(upstreamStyle), &s); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if s.AutoscalerStatus != ClusterAutoscalerRunning {
		t.Errorf("autoscalerStatus = %q", s.AutoscalerStatus)
	}
	h := s.ClusterWide.Health
	if h.Status != ClusterHealthy || h.NodeCounts.Registered.Total != 4 || h.NodeCounts.Registered.BeingDeleted != 1 ||
		h.NodeCounts.Registered.Unready.Total != 1 || h.NodeCounts.LongUnregistered != 1 || h.NodeCounts.Unregistered != 2 {
		t.Errorf("health = %+v", h)
	}
	if !h.LastProbeTime.Time.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("lastProbeTime = %v", h.LastProbeTime)
	}
	if s.ClusterWide.ScaleUp.Status != ClusterScaleUpInProgress || !s.ClusterWide.ScaleUp.LastTransitionTime.IsZero() {
		t.Errorf("scaleUp = %+v", s.ClusterWide.ScaleUp)
	}
	if len(s.NodeGroups) != 1 {
		t.Fatalf("nodeGroups = %+v", s.NodeGroups)
	}
	g := s.NodeGroups[0]
	if g.Name != "pool-uuid-1" || g.Health.MinSize != 1 || g.Health.MaxSize != 5 || g.Health.CloudProviderTarget != 3 ||
		g.ScaleUp.Status != NodeGroupScaleUpBackoff || g.ScaleUp.BackoffInfo.ErrorCode != "no-code-digitalocean" ||
		g.ScaleDown.Status != ScaleDownCandidatesPresent || g.ScaleDown.Candidates != 2 {
		t.Errorf("node group = %+v", g)
	}
	at, err := time.Parse(StatusTimeLayout, s.Time)
	if err != nil {
		t.Fatalf("time %q: %v", s.Time, err)
	}
	if FormatTime(at) != s.Time {
		t.Errorf("FormatTime round trip: %q != %q", FormatTime(at), s.Time)
	}
}

func TestFormatTimeMatchesTimeString(t *testing.T) {
	// Upstream writes time.Time.String() of a wall-clock time; ours must read the same.
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("EST", -5*3600))
	if got, want := FormatTime(at), at.String(); got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
}
