package capacitybuffer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	cbfake "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/clientset/versioned/fake"
	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// liveSpec is the template as its owner wrote it: what the caches trim
// (internal/informercache) is set, as a namespace enforcing the restricted Pod
// Security Standard requires.
func liveSpec(cpu string) apiv1.PodTemplateSpec {
	t := podSpec(cpu, false)
	t.Spec.SecurityContext = &apiv1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &apiv1.SeccompProfile{Type: apiv1.SeccompProfileTypeRuntimeDefault}}
	c := &t.Spec.Containers[0]
	c.SecurityContext = &apiv1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &apiv1.Capabilities{Drop: []apiv1.Capability{"ALL"}}}
	c.Env = []apiv1.EnvVar{{Name: "MODE", Value: "warm"}}
	c.Command = []string{"/app"}
	return t
}

// bufferFixture is a controller over one buffer in namespace "apps" whose
// caches hold testSources' trimmed templates, and whose API server (kube)
// holds the live PodTemplate "shape" and Deployment "web" (liveSpec).
type bufferFixture struct {
	ctrl  *Controller
	api   *cbfake.Clientset
	kube  *kubefake.Clientset
	delay *recordingQueue
	key   string
}

// recordingQueue is a work queue whose delays pass at once; it records
// each delay asked for.
type recordingQueue struct {
	workqueue.TypedInterface[string]
	delays []time.Duration
}

func newRecordingQueue() *recordingQueue {
	return &recordingQueue{TypedInterface: workqueue.NewTyped[string]()}
}

func (q *recordingQueue) AddAfter(item string, d time.Duration) {
	q.delays = append(q.delays, d)
	q.Add(item)
}

func newBufferFixture(t *testing.T, ctx context.Context, spec v1beta1.CapacityBufferSpec, createPod k8stesting.ReactionFunc) *bufferFixture {
	t.Helper()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 3}
	}
	kube := kubefake.NewClientset(
		&apiv1.PodTemplate{ObjectMeta: meta("shape"), Template: liveSpec("1")},
		&appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10), Template: liveSpec("500m")}},
	)
	kube.PrependReactor("create", "pods", createPod)
	api := cbfake.NewSimpleClientset(newBuffer("apps", "warm", spec))
	client, err := NewClient(api)
	if err != nil {
		t.Fatal(err)
	}
	go client.informer.Run(ctx.Done())
	delay := newRecordingQueue()
	f := &bufferFixture{ctrl: newController(client, testSources(t), kube, true, NewTemplates(), nil, delay),
		api: api, kube: kube, delay: delay, key: "apps/warm"}
	if err := f.ctrl.Watch(client.informer); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the buffer in the cache", func() bool { return len(client.List()) == 1 })
	t.Cleanup(f.ctrl.queue.ShutDown)
	return f
}

// count returns how many actions of verb on resource a fake client saw.
func count(actions []k8stesting.Action, verb, resource string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// A dry run refused with a message that changes on every try (a
// ResourceQuota names the generated pod and the usage) writes the
// condition once, and the refused buffer is tried again only as its
// backoff allows: 1 s, then 2 s, then 4 s. Before, each refusal rewrote
// the condition, whose write woke the controller at once: thousands of
// dry runs and writes a second.
func TestRefusedBufferBacksOffAndWritesOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tries atomic.Int32
	refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
		n := tries.Add(1)
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, fmt.Sprintf("%sx%d", dryRunPrefix, n),
			fmt.Errorf("exceeded quota: compute, requested: cpu=1,pods=1, used: cpu=%d,pods=%d, limited: cpu=4,pods=4", n, n))
	}
	f := newBufferFixture(t, ctx, v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)}, refuse)

	for round := 1; round <= 4; round++ {
		if !f.ctrl.processNext(ctx) {
			t.Fatal("queue shut down")
		}
		if got := int(tries.Load()); got != round {
			t.Fatalf("round %d: %d dry runs", round, got)
		}
		if round == 1 {
			// The status write reaches the cache; an update of status only
			// queues nothing: the only way back is the backoff's.
			waitFor(t, "the condition in the cache", func() bool {
				return meta.IsStatusConditionFalse(f.ctrl.client.List()[0].Status.Conditions, v1beta1.ReadyForProvisioningCondition)
			})
		}
	}
	wantDelays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if fmt.Sprint(f.delay.delays) != fmt.Sprint(wantDelays) {
		t.Errorf("retried after %v, want %v", f.delay.delays, wantDelays)
	}
	if n := f.ctrl.queue.Len(); n != 1 {
		t.Errorf("%d buffers queued, want 1 (the retry; no other wake-up)", n)
	}
	if n := count(f.api.Actions(), "update", v1beta1.Plural); n != 1 {
		t.Errorf("%d status writes for one unchanged refusal, want 1", n)
	}
	c := meta.FindStatusCondition(f.ctrl.client.List()[0].Status.Conditions, v1beta1.ReadyForProvisioningCondition)
	want := `Buffer not ready for provisioning: the API server refuses a pod of this template (dry run): pods "capacity-buffer-dry-run-<generated>" is forbidden: exceeded quota: compute, requested: cpu=1,pods=1, limited: cpu=4,pods=4`
	if c == nil || c.Message != want {
		t.Errorf("condition %+v\nwant message %q", c, want)
	}

	// The refusal ends (the quota was raised): the next try makes the
	// buffer ready and ends its backoff.
	tries.Store(-100)
	f.kube.PrependReactor("create", "pods", admitAsIs)
	if !f.ctrl.processNext(ctx) {
		t.Fatal("queue shut down")
	}
	if got := f.ctrl.queue.NumRequeues(f.key); got != 0 {
		t.Errorf("%d requeues after success, want 0", got)
	}
	if f.ctrl.templates.Get(f.ctrl.client.List()[0].UID) == nil {
		t.Error("no template for the injector after the dry run passed")
	}
}

// admitAsIs answers a dry-run create with the pod it was given.
func admitAsIs(a k8stesting.Action) (bool, runtime.Object, error) {
	pod := a.(k8stesting.CreateAction).GetObject().(*apiv1.Pod).DeepCopy()
	pod.Name = pod.GenerateName + "abcde"
	return true, pod, nil
}

// The dry run sends the template as its owner wrote it, read from the API
// server, not the cached one the caches trimmed: its security contexts,
// environment and command; the injector's pods take the answer.
func TestDryRunSendsTheLiveTemplate(t *testing.T) {
	cases := []struct {
		name string
		spec v1beta1.CapacityBufferSpec
	}{
		{"podTemplateRef", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1)}},
		{"scalableRef Deployment", v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Replicas: ptr.To[int32](1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var sent *apiv1.Pod
			var opts metav1.CreateOptions
			f := newBufferFixture(t, ctx, tc.spec, func(a k8stesting.Action) (bool, runtime.Object, error) {
				sent = a.(k8stesting.CreateAction).GetObject().(*apiv1.Pod).DeepCopy()
				opts = a.(k8stesting.CreateActionImpl).CreateOptions
				return admitAsIs(a)
			})
			if err := f.ctrl.sync(ctx, f.key); err != nil {
				t.Fatal(err)
			}
			if sent == nil {
				t.Fatal("no dry run")
			}
			if len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll || sent.Namespace != "apps" {
				t.Errorf("create options %+v in namespace %q, want a dry run in apps", opts, sent.Namespace)
			}
			c := sent.Spec.Containers[0]
			if sent.Spec.SecurityContext == nil || sent.Spec.SecurityContext.RunAsNonRoot == nil || c.SecurityContext == nil ||
				c.SecurityContext.AllowPrivilegeEscalation == nil || len(c.Env) != 1 || len(c.Command) != 1 {
				t.Errorf("dry run sent a trimmed template: pod securityContext %v, container %+v", sent.Spec.SecurityContext, c)
			}
			tmpl := f.ctrl.templates.Get(f.ctrl.client.List()[0].UID)
			if tmpl == nil || tmpl.Spec.Containers[0].SecurityContext == nil {
				t.Errorf("the injector's template is not the dry run's answer: %+v", tmpl)
			}
			// Admitted once: syncing again sends nothing while nothing changed.
			if err := f.ctrl.sync(ctx, f.key); err != nil {
				t.Fatal(err)
			}
			if n := count(f.kube.Actions(), "create", "pods"); n != 1 {
				t.Errorf("%d dry runs, want 1", n)
			}
		})
	}
}

// Only what can change a buffer's status queues it: its own spec (a new
// generation), its creation and deletion, and a new generation of the
// object its template comes from. Status writes (the controller's own and
// the injector's) and workloads' status updates queue nothing.
func TestEventsThatQueueABuffer(t *testing.T) {
	c := newController(&Client{}, Sources{}, nil, false, NewTemplates(), nil, newRecordingQueue())
	defer c.queue.ShutDown()
	buffer := func(gen int64, ready bool) *v1beta1.CapacityBuffer {
		b := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "warm", Generation: gen}}
		if ready {
			setCondition(b, v1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, v1beta1.AttributesSetSuccessfullyReason, "ready")
		}
		return b
	}
	deploy := func(gen int64, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: gen}, Status: appsv1.DeploymentStatus{ReadyReplicas: ready}}
	}
	h := c.handler()
	cases := []struct {
		name     string
		old, new interface{}
		queued   int
	}{
		{"buffer status written", buffer(1, false), buffer(1, true), 0},
		{"buffer spec changed", buffer(1, true), buffer(2, true), 1},
		{"deployment status changed", deploy(3, 1), deploy(3, 2), 0},
	}
	for _, tc := range cases {
		h.OnUpdate(tc.old, tc.new)
		if n := c.queue.Len(); n != tc.queued {
			t.Errorf("%s: %d queued, want %d", tc.name, n, tc.queued)
		}
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			c.queue.Done(k)
		}
	}
	h.OnDelete(buffer(2, true))
	if n := c.queue.Len(); n != 1 {
		t.Errorf("buffer deleted: %d queued, want 1", n)
	}
}

// A refusal's message keeps what names the cause and drops what changes
// from one try to the next.
func TestStableMessage(t *testing.T) {
	quota := func(name string, used int) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, name,
			fmt.Errorf("exceeded quota: q, requested: pods=1, used: pods=%d, limited: pods=4", used))
	}
	cases := []struct {
		name string
		a, b error
		same bool
		want string // a substring of a's stable message
	}{
		{"quota usage and pod name", quota(dryRunPrefix+"x7k2p", 4), quota(dryRunPrefix+"b9zzq", 5), true, "exceeded quota: q, requested: pods=1, limited: pods=4"},
		{"two quotas", quota(dryRunPrefix+"x7k2p", 4), errors.New("exceeded quota: other"), false, "exceeded quota: q"},
		{"pod security", errors.New(`pods "` + dryRunPrefix + `a1b2c" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`),
			errors.New(`pods "` + dryRunPrefix + `zzzzz" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`), true, `violates PodSecurity "restricted:latest": runAsNonRoot != true`},
	}
	for _, tc := range cases {
		a, b := stableMessage(tc.a), stableMessage(tc.b)
		if (a == b) != tc.same {
			t.Errorf("%s: %q and %q: same %v, want %v", tc.name, a, b, a == b, tc.same)
		}
		if !strings.Contains(a, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.name, a, tc.want)
		}
	}
}
