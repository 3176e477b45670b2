package provisioningrequest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	prfake "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned/fake"
	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

func request(name, class string, params map[string]v1.Parameter) *v1.ProvisioningRequest {
	return &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       v1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params, PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "ppt-" + name + "-main"}, Count: 3}}},
	}
}

var t0 = time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)

func TestSupported(t *testing.T) {
	cc, atomic := v1.ProvisioningClassCheckCapacity, v1.ProvisioningClassBestEffortAtomicScaleUp
	inst := map[string]v1.Parameter{ProcessorInstanceParameter: "a"}
	cases := []struct {
		name     string
		class    string
		params   map[string]v1.Parameter
		instance string
		want     bool
	}{
		{"check-capacity", cc, nil, "", true},
		{"best-effort-atomic", atomic, nil, "", true},
		{"another controller's class", "queued-provisioning.gke.io", nil, "", false},
		{"check-capacity for another instance", cc, inst, "", false},
		{"check-capacity for this instance", cc, inst, "a", true},
		{"check-capacity for a different instance", cc, inst, "b", false},
		{"check-capacity without instance, instance set", cc, nil, "a", false},
		{"instance as class prefix (deprecated)", "a" + cc, nil, "a", true},
		{"best-effort-atomic with an instance set", atomic, nil, "a", false},
	}
	for _, tc := range cases {
		if got := Supported(request("r", tc.class, tc.params), tc.instance); got != tc.want {
			t.Errorf("%s: Supported = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The pods of a request take the room real ones would: limits alone,
// in a container or at pod level (spec.resources), are requested.
func TestPodsForRequestLimits(t *testing.T) {
	gpu := apiv1.ResourceName("nvidia.com/gpu")
	tmpl := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}, Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{
		Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{Limits: apiv1.ResourceList{gpu: resource.MustParse("1")}}}},
		Resources:  &apiv1.ResourceRequirements{Limits: apiv1.ResourceList{apiv1.ResourceMemory: resource.MustParse("3Gi")}},
	}}}
	pr := request("r", v1.ProvisioningClassCheckCapacity, nil)
	pr.Spec.PodSets = []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "t"}, Count: 2}}
	ps, err := podsFor(pr, func(string, string) (*apiv1.PodTemplate, error) { return tmpl, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d pods, want 2", len(ps))
	}
	for _, p := range ps {
		if got := p.Spec.Containers[0].Resources.Requests[gpu]; got.Cmp(resource.MustParse("1")) != 0 {
			t.Errorf("pod %s: gpu request %v, want the limit 1", p.Name, got.String())
		}
		if got := p.Spec.Resources.Requests[apiv1.ResourceMemory]; got.Cmp(resource.MustParse("3Gi")) != 0 {
			t.Errorf("pod %s: pod-level memory request %v, want the limit 3Gi", p.Name, got.String())
		}
	}
	if tmpl.Template.Spec.Resources.Requests != nil {
		t.Error("the cached PodTemplate was changed")
	}
}

func TestPodsForInvalidPodSets(t *testing.T) {
	tmpl := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"}, Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c"}}}}}
	empty := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "ns"}}
	get := func(ns, name string) (*apiv1.PodTemplate, error) {
		for _, t := range []*apiv1.PodTemplate{tmpl, empty} {
			if t.Name == name {
				return t, nil
			}
		}
		return nil, &notFound{name}
	}
	cases := []struct {
		sets    []v1.PodSet
		wantErr string
	}{
		{nil, "spec.podSets is empty"},
		{[]v1.PodSet{{PodTemplateRef: v1.Reference{Name: "t"}, Count: 0}}, "spec.podSets[0].count: 0"},
		{[]v1.PodSet{{PodTemplateRef: v1.Reference{Name: "t"}, Count: 1}, {Count: 1}}, "spec.podSets[1].podTemplateRef.name is empty"},
		{[]v1.PodSet{{PodTemplateRef: v1.Reference{Name: "missing"}, Count: 1}}, "spec.podSets[0].podTemplateRef: PodTemplate ns/missing"},
		{[]v1.PodSet{{PodTemplateRef: v1.Reference{Name: "empty"}, Count: 1}}, "has no containers"},
	}
	for _, tc := range cases {
		pr := request("r", v1.ProvisioningClassCheckCapacity, nil)
		pr.Spec.PodSets = tc.sets
		if _, err := podsFor(pr, get); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error %v, want %q", tc.sets, err, tc.wantErr)
		}
	}
	// A template's generateName does not name the pods: two requests of
	// one template must not make pods of one name (and UID).
	tmpl.Template.GenerateName = "worker-"
	// A GPU asked for as a limit alone is requested, as in a real pod.
	tmpl.Template.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	pr := request("r", v1.ProvisioningClassCheckCapacity, nil)
	pr.Spec.PodSets = []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "t"}, Count: 2}}
	ps, err := podsFor(pr, get)
	if err != nil || len(ps) != 2 || ps[1].Name != "r-0-1" || !fakepods.IsFake(ps[0]) || ps[0].Annotations[v1.ProvisioningRequestPodAnnotationKey] != "r" {
		t.Fatalf("pods %v, err %v", ps, err)
	}
	if q := ps[0].Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("fake pod GPU request %v, want the limit 1", q.String())
	}
	if tmpl.Template.Spec.Containers[0].Resources.Requests != nil {
		t.Error("the PodTemplate itself was changed")
	}
}

type notFound struct{ name string }

func (n *notFound) Error() string { return n.name + " not found" }

// env is a Manager over fake clients holding the given requests and the
// PodTemplate each names (3 pods of 1 cpu).
type env struct {
	m      *Manager
	w      *Writer
	events *writes
	api    *prfake.Clientset
	kube   *fake.Clientset
}

func newEnv(t *testing.T, prs ...*v1.ProvisioningRequest) *env {
	t.Helper()
	var objs []runtime.Object
	var kobjs []runtime.Object
	for _, pr := range prs {
		objs = append(objs, pr)
		kobjs = append(kobjs, &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: pr.Spec.PodSets[0].PodTemplateRef.Name, Namespace: "ns"},
			Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c",
				Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}}}})
	}
	api := prfake.NewSimpleClientset(objs...)
	kube := fake.NewClientset(kobjs...)
	f := informers.NewSharedInformerFactory(kube, 0)
	c, err := NewClient(api, f, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	podLister := f.Core().V1().Pods().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	m := NewManager(c, podLister, Options{InitialBackoff: time.Minute, MaxBackoff: 10 * time.Minute, BackoffCacheSize: 10})
	return &env{m: m, w: NewWriter(c), events: &writes{}, api: api, kube: kube}
}

// write applies what the manager decided, as the loop does after its
// decisions.
func (e *env) write() {
	e.w.Write(context.Background(), e.m.Results(), e.events)
}

// writes is a Recorder keeping what a Writer recorded, in order:
// "consumer ns/pod request" and "written ns/name Type=Status Reason". The
// events' text is core/report's (TestProvisioningRequestEvents).
type writes struct{ got []string }

func (w *writes) ProvisioningRequestConsumer(c Consumer) {
	w.got = append(w.got, "consumer "+c.Pod.Namespace+"/"+c.Pod.Name+" "+c.Request)
}

func (w *writes) ProvisioningRequestWritten(u StatusUpdate) {
	w.got = append(w.got, "written "+u.Request.Namespace+"/"+u.Request.Name+" "+u.Outcome.Type+"="+string(u.Outcome.Status)+" "+u.Outcome.Reason)
}

func withCondition(pr *v1.ProvisioningRequest, typ string, status metav1.ConditionStatus, at time.Time) *v1.ProvisioningRequest {
	setCondition(pr, typ, status, "r", "m", metav1.NewTime(at))
	return pr
}

// The booking of a Provisioned request holds room (fake pods first, never
// causing a scale-up) for BookingTime, then the request is BookingExpired
// and holds none.
func TestBookingLifetime(t *testing.T) {
	pr := withCondition(request("job-prov-1", v1.ProvisioningClassCheckCapacity, nil), v1.Provisioned, metav1.ConditionTrue, t0)
	e := newEnv(t, pr)
	real := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}

	out, err := e.m.Process(&fakepods.Context{Now: t0.Add(BookingTime - time.Second)}, []*apiv1.Pod{real})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[3] != real || !fakepods.HoldsRoomOnly(out[0]) {
		t.Fatalf("within the booking: got %d pods (last real: %v), want 3 booked first then the pending one", len(out), out[len(out)-1] == real)
	}
	if cc, at := e.m.Due(); cc || at {
		t.Fatal("a Provisioned request is provisioned again")
	}

	out, _ = e.m.Process(&fakepods.Context{Now: t0.Add(BookingTime + time.Second)}, []*apiv1.Pod{real})
	e.write()
	got := e.status(t, "job-prov-1")
	if c := findCondition(got, v1.BookingExpired); c == nil || c.Status != metav1.ConditionTrue || c.Reason != CapacityReservationTimeExpiredReason || c.Message != CapacityReservationTimeExpiredMsg {
		t.Fatalf("after the booking time: BookingExpired = %+v", c)
	}
	// The cache has not seen the update yet; the next iteration reads it.
	e.waitCondition(t, "job-prov-1", v1.BookingExpired)
	out, _ = e.m.Process(&fakepods.Context{Now: t0.Add(BookingTime + 2*time.Second)}, []*apiv1.Pod{real})
	if len(out) != 1 {
		t.Fatalf("after expiry %d pods hold room, want none", len(out)-1)
	}
}

// The client's List returns the cache's own objects; the manager sets
// conditions on copies. A status write that fails leaves the cache as the
// API server has it, so the next iteration still sees the booking and
// tries again.
func TestFailedStatusWriteLeavesTheCache(t *testing.T) {
	pr := withCondition(request("job-prov-1", v1.ProvisioningClassCheckCapacity, nil), v1.Provisioned, metav1.ConditionTrue, t0)
	e := newEnv(t, pr)
	writes := 0
	e.api.PrependReactor("update", "provisioningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		writes++
		return true, nil, apierrors.NewConflict(v1.Resource("provisioningrequests"), "job-prov-1", errors.New("changed"))
	})
	after := t0.Add(BookingTime + time.Second)
	for i := 1; i <= 2; i++ {
		if _, err := e.m.Process(&fakepods.Context{Now: after}, nil); err != nil {
			t.Fatal(err)
		}
		e.write()
		if writes != i {
			t.Fatalf("iteration %d: %d status writes, want %d (BookingExpired tried again)", i, writes, i)
		}
		cached, err := e.m.client.List()
		if err != nil {
			t.Fatal(err)
		}
		if c := findCondition(cached[0], v1.BookingExpired); c != nil {
			t.Fatalf("iteration %d: the cache shows %+v, which the API server refused", i, c)
		}
	}
}

// Consumer pods bound to a node release booked pods one for one; pending
// consumers are dropped from scale-up (their room is booked).
func TestConsumersTakeOverTheBooking(t *testing.T) {
	pr := withCondition(request("job-prov-1", v1.ProvisioningClassBestEffortAtomicScaleUp, nil), v1.Provisioned, metav1.ConditionTrue, t0)
	e := newEnv(t, pr)
	consumer := func(name, node string) *apiv1.Pod {
		return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name),
			Annotations: map[string]string{v1.ProvisioningRequestPodAnnotationKey: "job-prov-1", v1.ProvisioningClassPodAnnotationKey: v1.ProvisioningClassBestEffortAtomicScaleUp}},
			Spec: apiv1.PodSpec{NodeName: node}}
	}
	for _, p := range []*apiv1.Pod{consumer("bound-1", "n1"), consumer("bound-2", "n2")} {
		if _, err := e.kube.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ps, _ := e.m.pods.List(everything()); len(ps) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pendingConsumer := consumer("pending-3", "")
	old := pendingConsumer.DeepCopy()
	old.Annotations = map[string]string{v1.DeprecatedProvisioningRequestPodAnnotationKey: "job-prov-1"}
	old.Name, old.UID = "older-spelling", "u-old"
	out, _ := e.m.Process(&fakepods.Context{Now: t0.Add(time.Minute)}, []*apiv1.Pod{pendingConsumer, old})
	if len(out) != 1 || !fakepods.HoldsRoomOnly(out[0]) {
		t.Fatalf("got %d pods, want 1 booked pod (3 booked - 2 bound consumers) and no pending consumer", len(out))
	}
}

// A request that does not fit is Provisioned=False and retried after the
// initial backoff, then after twice that.
func TestBackoff(t *testing.T) {
	pr := withCondition(request("r", v1.ProvisioningClassCheckCapacity, nil), v1.Provisioned, metav1.ConditionFalse, t0)
	e := newEnv(t, pr)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{30 * time.Second, false}, {61 * time.Second, true}, {90 * time.Second, false}, {121 * time.Second, true}} {
		// Each retry bumps the backoff; the condition's time stays t0 here.
		if got := e.m.available(pr, t0.Add(tc.at)); got != tc.want {
			t.Errorf("at +%v available = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// setCondition stamps every write, a status kept included (upstream's
// rule, which the backoff above and the week-long TTL count from), and
// leaves the other conditions as they were.
func TestSetCondition(t *testing.T) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	cases := []struct {
		name   string
		status metav1.ConditionStatus
	}{
		{"status kept: stamped anew", metav1.ConditionFalse},
		{"status changed: stamped", metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := request("r", v1.ProvisioningClassCheckCapacity, nil)
			pr.Generation = 4
			setCondition(pr, v1.Accepted, metav1.ConditionTrue, AcceptedReason, AcceptedMsg, at(0))
			setCondition(pr, v1.Provisioned, metav1.ConditionFalse, CapacityIsNotFoundReason, CapacityIsNotFoundMsg, at(0))
			setCondition(pr, v1.Provisioned, tc.status, "Retried", "m", at(time.Minute))
			if n := len(pr.Status.Conditions); n != 2 {
				t.Fatalf("%d conditions, want 2 (Accepted, Provisioned)", n)
			}
			c := findCondition(pr, v1.Provisioned)
			if want := at(time.Minute); c.Status != tc.status || c.Reason != "Retried" || c.Message != "m" || !c.LastTransitionTime.Equal(&want) || c.ObservedGeneration != 4 {
				t.Errorf("Provisioned = %+v, want %s/Retried stamped %v, generation 4", c, tc.status, want)
			}
			if a, want := findCondition(pr, v1.Accepted), at(0); a.Status != metav1.ConditionTrue || !a.LastTransitionTime.Equal(&want) {
				t.Errorf("Accepted changed: %+v", a)
			}
		})
	}
}

// A request still not fitting at its retry is tried again a backoff after
// that retry, not after its first try.
func TestBackoffCountsFromTheLastTry(t *testing.T) {
	pr := withCondition(request("r", v1.ProvisioningClassCheckCapacity, nil), v1.Provisioned, metav1.ConditionFalse, t0)
	e := newEnv(t, pr)
	if !e.m.available(pr, t0.Add(61*time.Second)) {
		t.Fatal("not available after the initial backoff")
	}
	retry := t0.Add(61 * time.Second)
	setCondition(pr, v1.Provisioned, metav1.ConditionFalse, CapacityIsNotFoundReason, CapacityIsNotFoundMsg, metav1.NewTime(retry))
	// The backoff is now 2 minutes, from the retry: available after
	// retry+2m only (counted from t0 it would be at t0+2m).
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{{t0.Add(121 * time.Second), false}, {retry.Add(119 * time.Second), false}, {retry.Add(121 * time.Second), true}} {
		if got := e.m.available(pr, tc.at); got != tc.want {
			t.Errorf("at +%v available = %v, want %v", tc.at.Sub(t0), got, tc.want)
		}
	}
}

func everything() labels.Selector { return labels.Everything() }

func findCondition(pr *v1.ProvisioningRequest, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(pr.Status.Conditions, typ)
}

// status reads a request from the (fake) API server.
func (e *env) status(t *testing.T, name string) *v1.ProvisioningRequest {
	t.Helper()
	pr, err := e.api.AutoscalingV1().ProvisioningRequests("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// waitCondition waits for the client's cache to show the condition.
func (e *env) waitCondition(t *testing.T, name, typ string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		prs, _ := e.m.client.List()
		for _, pr := range prs {
			if pr.Name == name && isTrue(pr, typ) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("cache never showed %s on %s", typ, name)
}

// Kueue creates a request before its PodTemplates: a new request naming a
// PodTemplate not there yet waits for it (not Failed, not provisioned);
// past TemplateGrace it is Failed with FailedToCreatePods, as upstream.
func TestMissingPodTemplate(t *testing.T) {
	young := request("young", v1.ProvisioningClassCheckCapacity, nil)
	old := request("old", v1.ProvisioningClassCheckCapacity, nil)
	for _, pr := range []*v1.ProvisioningRequest{young, old} {
		pr.Spec.PodSets = append(pr.Spec.PodSets, v1.PodSet{PodTemplateRef: v1.Reference{Name: "ppt-" + pr.Name + "-workers"}, Count: 1})
	}
	now := t0
	young.CreationTimestamp = metav1.NewTime(now.Add(-TemplateGrace / 2))
	old.CreationTimestamp = metav1.NewTime(now.Add(-TemplateGrace - time.Second))
	e := newEnv(t, young, old)
	if _, err := e.m.Process(&fakepods.Context{Now: now}, nil); err != nil {
		t.Fatal(err)
	}
	e.write()
	if cc, at := e.m.Due(); cc || at {
		t.Error("a request without its PodTemplates is due")
	}
	if c := findCondition(e.status(t, "young"), v1.Failed); c != nil {
		t.Errorf("young request: Failed = %+v, want none while its PodTemplate may still come", c)
	}
	c := findCondition(e.status(t, "old"), v1.Failed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != FailedToCreatePodsReason || !strings.Contains(c.Message, "ppt-old-workers") {
		t.Errorf("old request: Failed = %+v, want True FailedToCreatePods naming the PodTemplate", c)
	}
}

// The manager decides; nothing reaches the API server or the events until
// the loop writes its results. Then the status is written, and the event
// on the request tells the outcome, as before; a pending consumer pod is
// told once that it triggers no scale-up.
func TestDecisionsWrittenAfter(t *testing.T) {
	pr := withCondition(request("job-prov-1", v1.ProvisioningClassCheckCapacity, nil), v1.Provisioned, metav1.ConditionTrue, t0)
	e := newEnv(t, pr)
	consumer := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns", UID: "u-worker",
		Annotations: map[string]string{v1.ProvisioningRequestPodAnnotationKey: "job-prov-1"}}}
	if _, err := e.m.Process(&fakepods.Context{Now: t0.Add(BookingTime + time.Second)}, []*apiv1.Pod{consumer}); err != nil {
		t.Fatal(err)
	}
	if c := findCondition(e.status(t, "job-prov-1"), v1.BookingExpired); c != nil {
		t.Fatalf("BookingExpired written during the decisions: %+v", c)
	}
	if len(e.events.got) != 0 {
		t.Fatalf("events recorded during the decisions: %d", len(e.events.got))
	}
	e.write()
	if c := findCondition(e.status(t, "job-prov-1"), v1.BookingExpired); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("after the write: BookingExpired = %+v", c)
	}
	got := e.events.got
	want := []string{
		"consumer ns/worker job-prov-1",
		"written ns/job-prov-1 BookingExpired=True " + CapacityReservationTimeExpiredReason,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Taken: a second write has nothing to do.
	if r := e.m.Results(); !r.Empty() {
		t.Errorf("results left after the write: %+v", r)
	}
}
