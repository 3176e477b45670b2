package statuscm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
)

const (
	ns     = "kube-system"
	cmName = "cluster-autoscaler-status"
)

var probe = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func runningStatus() *api.ClusterAutoscalerStatus {
	counts := api.NodeCount{Registered: api.RegisteredNodeCount{Total: 3, Ready: 3}}
	return &api.ClusterAutoscalerStatus{
		Time:             "2026-01-02 03:04:05 +0000 UTC",
		AutoscalerStatus: api.ClusterAutoscalerRunning,
		ClusterWide: api.ClusterWideStatus{
			Health:    api.ClusterHealthCondition{Status: api.ClusterHealthy, NodeCounts: counts, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleUp:   api.ClusterScaleUpCondition{Status: api.ClusterScaleUpNoActivity, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleDown: api.ScaleDownCondition{Status: api.ScaleDownNoCandidates, LastProbeTime: probe, LastTransitionTime: probe},
		},
		NodeGroups: []api.NodeGroupStatus{{
			Name: "pool-uuid-1",
			Health: api.NodeGroupHealthCondition{Status: api.NodeGroupHealthy, NodeCounts: counts,
				CloudProviderTarget: 3, MinSize: 1, MaxSize: 5, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleUp: api.NodeGroupScaleUpCondition{Status: api.NodeGroupScaleUpBackoff,
				BackoffInfo:   api.BackoffInfo{ErrorCode: "no-code-digitalocean", ErrorMessage: "example"},
				LastProbeTime: probe, LastTransitionTime: probe},
			ScaleDown: api.ScaleDownCondition{Status: api.ScaleDownCandidatesPresent, Candidates: 1, LastProbeTime: probe, LastTransitionTime: probe},
		}},
	}
}

// The YAML a user reads under data.status with `kubectl get cm -o yaml`:
// upstream's field names, keys sorted, block style.
const wantRunningYAML = `autoscalerStatus: Running
clusterWide:
  health:
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 3
        suspended: 0
        total: 3
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 0
    status: Healthy
  scaleDown:
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    status: NoCandidates
  scaleUp:
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    status: NoActivity
nodeGroups:
- health:
    cloudProviderTarget: 3
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    maxSize: 5
    minSize: 1
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 3
        suspended: 0
        total: 3
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 0
    status: Healthy
  name: pool-uuid-1
  scaleDown:
    candidates: 1
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    status: CandidatesPresent
  scaleUp:
    backoffInfo:
      errorCode: no-code-digitalocean
      errorMessage: example
    lastProbeTime: "2026-01-02T03:04:05Z"
    lastTransitionTime: "2026-01-02T03:04:05Z"
    status: Backoff
time: 2026-01-02 03:04:05 +0000 UTC
`

func TestStatusYAMLMatchesUpstreamShape(t *testing.T) {
	got := StatusYAML(runningStatus())
	if got != wantRunningYAML {
		t.Errorf("status YAML differs.\ngot:\n%s\nwant:\n%s", got, wantRunningYAML)
	}
}

func TestInitializingStatusYAML(t *testing.T) {
	got := StatusYAML(&api.ClusterAutoscalerStatus{
		Time:             "2026-01-02 03:04:05 +0000 UTC",
		AutoscalerStatus: api.ClusterAutoscalerInitializing,
		Message:          "waiting for nodes",
	})
	var doc map[string]interface{}
	if err := yaml.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["autoscalerStatus"] != "Initializing" || doc["message"] != "waiting for nodes" {
		t.Errorf("unexpected top level: %v", doc)
	}
	if _, ok := doc["nodeGroups"]; ok {
		t.Errorf("nodeGroups rendered with no groups:\n%s", got)
	}
	// Unset times render as null, as upstream's do.
	if !strings.Contains(got, "lastProbeTime: null") {
		t.Errorf("unset probe time not rendered as null:\n%s", got)
	}
	// A group not in backoff still shows backoffInfo: {}.
	s := runningStatus()
	s.NodeGroups[0].ScaleUp = api.NodeGroupScaleUpCondition{Status: api.NodeGroupScaleUpNoActivity}
	s.NodeGroups[0].ScaleDown = api.ScaleDownCondition{Status: api.ScaleDownNoCandidates}
	got = StatusYAML(s)
	if !strings.Contains(got, "backoffInfo: {}") {
		t.Errorf("empty backoffInfo not rendered as {}:\n%s", got)
	}
	if strings.Contains(got, "candidates:") {
		t.Errorf("candidates rendered when 0:\n%s", got)
	}
}

func getCM(t *testing.T, kube *fake.Clientset) *apiv1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get status ConfigMap: %v", err)
	}
	return cm
}

func TestWriteStatusConfigMapCreates(t *testing.T) {
	writeAt := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	kube := fake.NewClientset()
	status := runningStatus()
	status.Time = "" // filled in by the writer

	out, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, status, nil, writeAt)
	if err != nil {
		t.Fatal(err)
	}
	if status.Time != "" {
		t.Error("caller's status was modified")
	}
	cm := getCM(t, kube)
	if out.Name != cmName || out.Namespace != ns {
		t.Errorf("returned %s/%s", out.Namespace, out.Name)
	}
	stamp := cm.Annotations[LastUpdatedAnnotation]
	parsed, err := time.Parse(api.StatusTimeLayout, stamp)
	if err != nil {
		t.Fatalf("annotation %q not in upstream layout: %v", stamp, err)
	}
	if !parsed.Equal(writeAt) {
		t.Errorf("annotation time %v, want %v", parsed, writeAt)
	}
	if len(cm.Data) != 1 {
		t.Errorf("data keys = %v, want only %q", cm.Data, StatusDataKey)
	}
	want := strings.Replace(wantRunningYAML, "time: 2026-01-02 03:04:05 +0000 UTC", "time: "+stamp, 1)
	if cm.Data[StatusDataKey] != want {
		t.Errorf("data.status:\n%s\nwant:\n%s", cm.Data[StatusDataKey], want)
	}
}

func TestWriteStatusConfigMapUpdatesKeepingOtherKeys(t *testing.T) {
	existing := &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName,
			Annotations: map[string]string{"owner": "ops", LastUpdatedAnnotation: "old"}},
		Data: map[string]string{StatusDataKey: "old", "note": "kept"},
	}
	kube := fake.NewClientset(existing)
	if _, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, runningStatus(), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	cm := getCM(t, kube)
	if cm.Data[StatusDataKey] != wantRunningYAML {
		t.Errorf("status not replaced:\n%s", cm.Data[StatusDataKey])
	}
	if cm.Data["note"] != "kept" || cm.Annotations["owner"] != "ops" {
		t.Errorf("other keys lost: data %v annotations %v", cm.Data, cm.Annotations)
	}
	if cm.Annotations[LastUpdatedAnnotation] == "old" {
		t.Error("last-updated annotation not refreshed")
	}

	// A second write with a new state replaces the first.
	s := runningStatus()
	s.AutoscalerStatus = api.ClusterAutoscalerInitializing
	s.NodeGroups = nil
	if _, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, s, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := getCM(t, kube).Data[StatusDataKey]
	if !strings.HasPrefix(got, "autoscalerStatus: Initializing\n") || strings.Contains(got, "nodeGroups") {
		t.Errorf("second write not reflected:\n%s", got)
	}
}

func TestWriteStatusConfigMapRetriesOnceAfterConflict(t *testing.T) {
	tests := []struct {
		name        string
		failUpdates int
		wantErr     bool
		wantUpdates int
		wantGets    int
		wantEvent   bool
	}{
		{name: "first update succeeds", failUpdates: 0, wantUpdates: 1, wantGets: 1},
		{name: "conflict then success", failUpdates: 1, wantUpdates: 2, wantGets: 2},
		{name: "conflict twice fails", failUpdates: 2, wantErr: true, wantUpdates: 2, wantGets: 2, wantEvent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(&apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}})
			updates, gets := 0, 0
			kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			kube.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				updates++
				if updates <= tc.failUpdates {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cmName, errors.New("object was modified"))
				}
				return false, nil, nil
			})
			recorder := &failures{}
			_, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, runningStatus(), recorder, time.Now())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if updates != tc.wantUpdates || gets != tc.wantGets {
				t.Errorf("updates=%d gets=%d, want %d/%d", updates, gets, tc.wantUpdates, tc.wantGets)
			}
			// The event's text is core/report's (TestStatusWriteFailed).
			switch {
			case len(recorder.got) > 0 && !tc.wantEvent:
				t.Errorf("unexpected failure recorded: %v", recorder.got)
			case len(recorder.got) != 1 && tc.wantEvent:
				t.Errorf("%d failures recorded after a failed write, want 1", len(recorder.got))
			case tc.wantEvent && recorder.got[0] != ns+"/"+cmName:
				t.Errorf("failure recorded on %q", recorder.got[0])
			}
			if !tc.wantErr && getCM(t, kube).Data[StatusDataKey] != wantRunningYAML {
				t.Error("status not written")
			}
		})
	}
}

// failures is a Recorder keeping the ConfigMaps whose writes failed.
type failures struct{ got []string }

func (f *failures) StatusWriteFailed(cm *apiv1.ConfigMap, _ error) {
	f.got = append(f.got, cm.Namespace+"/"+cm.Name)
}

func TestWriteStatusConfigMapCreateRace(t *testing.T) {
	// Another writer creates the ConfigMap between our get and our create.
	kube := fake.NewClientset()
	kube.PrependReactor("create", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().(*apiv1.ConfigMap).DeepCopy()
		obj.Data = map[string]string{StatusDataKey: "theirs"}
		if err := kube.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, cmName)
	})
	if _, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, runningStatus(), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := getCM(t, kube).Data[StatusDataKey]; got != wantRunningYAML {
		t.Errorf("status after race:\n%s", got)
	}
}

func TestWriteStatusConfigMapGetError(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cmName, errors.New("rbac"))
	})
	_, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, runningStatus(), nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), "kube-system/cluster-autoscaler-status") {
		t.Errorf("err = %v, want one naming the ConfigMap", err)
	}
	if _, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, nil, nil, time.Now()); err == nil {
		t.Error("nil status accepted")
	}
}

func TestDeleteStatusConfigMap(t *testing.T) {
	kube := fake.NewClientset(&apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}})
	if err := DeleteStatusConfigMap(context.Background(), kube, ns, cmName); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), cmName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap still there: %v", err)
	}
	// Already gone: not an error (ExitCleanUp may run twice).
	if err := DeleteStatusConfigMap(context.Background(), kube, ns, cmName); err != nil {
		t.Errorf("deleting a missing ConfigMap: %v", err)
	}
	kube.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cmName, errors.New("rbac"))
	})
	if err := DeleteStatusConfigMap(context.Background(), kube, ns, cmName); err == nil {
		t.Error("forbidden delete reported as success")
	}
}

// BenchmarkStatusYAML measures rendering the status of a cluster with 100
// node groups (done once per loop, each with a new probe time) and reports
// the ConfigMap size, which must stay far below the 1 MiB object limit.
func BenchmarkStatusYAML(b *testing.B) {
	s := runningStatus()
	g := s.NodeGroups[0]
	s.NodeGroups = nil
	for i := 0; i < 100; i++ {
		g.Name = fmt.Sprintf("8c5f0d1e-4b2a-4c3e-9f7a-%012d", i)
		s.NodeGroups = append(s.NodeGroups, g)
	}
	var size int
	for i := 0; i < b.N; i++ {
		now := metav1.NewTime(probe.Add(time.Duration(i) * 10 * time.Second))
		s.Time = api.FormatTime(now.Time)
		s.ClusterWide.Health.LastProbeTime, s.ClusterWide.ScaleUp.LastProbeTime, s.ClusterWide.ScaleDown.LastProbeTime = now, now, now
		for j := range s.NodeGroups {
			g := &s.NodeGroups[j]
			g.Health.LastProbeTime, g.ScaleUp.LastProbeTime, g.ScaleDown.LastProbeTime = now, now, now
		}
		out := StatusYAML(s)
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/status")
}

// The ConfigMap a write returned is updated by the next write without
// reading it again: one API call per loop instead of two.
func TestWriteStatusConfigMapReusesTheLastWrite(t *testing.T) {
	kube := fake.NewClientset()
	last, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, nil, runningStatus(), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	s := runningStatus()
	s.AutoscalerStatus = api.ClusterAutoscalerInitializing
	if _, err := WriteStatusConfigMap(context.Background(), kube, ns, cmName, last, s, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range kube.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if fmt.Sprint(verbs) != "[update]" {
		t.Fatalf("API calls of the second write = %v, want [update]", verbs)
	}
	if got := getCM(t, kube).Data[StatusDataKey]; !strings.HasPrefix(got, "autoscalerStatus: Initializing\n") {
		t.Errorf("second write not reflected:\n%s", got)
	}
}
