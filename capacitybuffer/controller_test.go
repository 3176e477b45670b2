package capacitybuffer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cbfake "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/clientset/versioned/fake"
	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

func newBuffer(ns, name string, spec v1beta1.CapacityBufferSpec) *v1beta1.CapacityBuffer {
	return &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Generation: 1}, Spec: spec}
}

// The controller resolves buffers in several namespaces into their status
// (bad input as a condition), the injector turns the ready ones into fake
// pods, and nothing is written again while nothing changes.
func TestControllerAndInjector(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := cbfake.NewSimpleClientset(
		newBuffer("apps", "warm", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)}),
		newBuffer("apps", "web", v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: ptr.To[int32](20)}),
		newBuffer("team-b", "broken", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "gone"}, Replicas: ptr.To[int32](1)}),
		newBuffer("apps", "other", v1beta1.CapacityBufferSpec{ProvisioningStrategy: ptr.To("example.com/other"), Replicas: ptr.To[int32](1)}),
	)
	client, err := NewClient(api)
	if err != nil {
		t.Fatal(err)
	}
	go client.informer.Run(ctx.Done())
	src := testSources(t)
	templates := NewTemplates()
	ctrl := NewController(client, src, nil, false, templates, nil)
	waitFor(t, "buffers in the cache", func() bool { return len(client.List()) == 4 })

	syncAll(ctx, t, ctrl)
	get := func(ns, name string) *v1beta1.CapacityBuffer {
		b, err := api.AutoscalingV1beta1().CapacityBuffers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	warm := get("apps", "warm")
	if c := meta.FindStatusCondition(warm.Status.Conditions, v1beta1.ReadyForProvisioningCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "AttributesSetSuccessfully" ||
		*warm.Status.Replicas != 2 || warm.Status.PodTemplateRef.Name != "shape" || *warm.Status.PodTemplateGeneration != 3 || *warm.Status.ProvisioningStrategy != v1beta1.ActiveProvisioningStrategy {
		t.Errorf("warm status %+v", warm.Status)
	}
	if web := get("apps", "web"); web.Status.Replicas == nil || *web.Status.Replicas != 2 || web.Status.PodTemplateRef != nil {
		t.Errorf("web status %+v, want 2 replicas (20%% of 10)", web.Status)
	}
	broken := get("team-b", "broken")
	if c := meta.FindStatusCondition(broken.Status.Conditions, v1beta1.ReadyForProvisioningCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "error" ||
		!strings.Contains(c.Message, "Buffer not ready for provisioning: spec.podTemplateRef: PodTemplate team-b/gone") || broken.Status.Replicas != nil {
		t.Errorf("broken status %+v", broken.Status)
	}
	if other := get("apps", "other"); len(other.Status.Conditions) != 0 {
		t.Errorf("a buffer of another strategy was touched: %+v", other.Status)
	}

	waitFor(t, "statuses in the cache", func() bool {
		n := 0
		for _, b := range client.List() {
			if len(b.Status.Conditions) > 0 {
				n++
			}
		}
		return n == 3
	})
	in := NewInjector(client, src, templates)
	w := &StatusWriter{client: client}
	real := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real"}}
	api.ClearActions()
	out, err := in.Process(&fakepods.Context{}, []*apiv1.Pod{real})
	if err != nil {
		t.Fatal(err)
	}
	// The injector decides; the loop writes its results after the
	// iteration's decisions.
	for _, a := range api.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("status written during the decisions: %v", a)
		}
	}
	w.Write(ctx, in.Results())
	if out[0] != real {
		t.Error("real pods are not first")
	}
	names := map[string]bool{}
	for _, p := range out[1:] {
		names[p.Namespace+"/"+p.Name] = true
		ref := metav1.GetControllerOf(p)
		if !fakepods.IsFake(p) || p.Annotations[drain.SafeToEvictKey] != "true" || p.Annotations["podType"] != "capacityBufferFakePod" || ref == nil || ref.Kind != "CapacityBuffer" {
			t.Errorf("fake pod %s: annotations %v owner %v", p.Name, p.Annotations, ref)
		}
	}
	want := []string{"apps/capacity-buffer-warm-1", "apps/capacity-buffer-warm-2", "apps/capacity-buffer-web-1", "apps/capacity-buffer-web-2"}
	for _, n := range want {
		if !names[n] {
			t.Errorf("no fake pod %s among %v", n, names)
		}
	}
	if len(out) != 1+len(want) {
		t.Errorf("%d pods, want %d", len(out), 1+len(want))
	}
	if c := meta.FindStatusCondition(get("apps", "warm").Status.Conditions, v1beta1.ProvisioningCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "FakePodsInjected" {
		t.Errorf("warm Provisioning condition %+v", c)
	}

	// Steady state: nothing changed, nothing written.
	// Both provisioned buffers' Provisioning conditions must be in the cache
	// first, or the injector rightly writes the one it cannot see yet.
	waitFor(t, "Provisioning in the cache", func() bool {
		n := 0
		for _, b := range client.List() {
			if meta.IsStatusConditionTrue(b.Status.Conditions, v1beta1.ProvisioningCondition) {
				n++
			}
		}
		return n == 2
	})
	api.ClearActions()
	syncAll(ctx, t, ctrl)
	if _, err := in.Process(&fakepods.Context{}, nil); err != nil {
		t.Fatal(err)
	}
	w.Write(ctx, in.Results())
	for _, a := range api.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("status written again with nothing changed: %v", a)
		}
	}
}

// syncAll syncs every cached buffer once, as the queue would; errors
// other than a buffer's not being ready fail the test.
func syncAll(ctx context.Context, t *testing.T, c *Controller) {
	t.Helper()
	for _, b := range c.client.List() {
		if err := c.sync(ctx, cache.ObjectName{Namespace: b.Namespace, Name: b.Name}.String()); err != nil && !errors.Is(err, errNotReady) {
			t.Fatalf("sync %s/%s: %v", b.Namespace, b.Name, err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A buffer's condition keeps its transition time while its status holds
// (meta.SetStatusCondition's rule), and a write is needed only when
// something in it changed.
func TestSetCondition(t *testing.T) {
	cases := []struct {
		name            string
		status          metav1.ConditionStatus
		reason, msg     string
		wantChanged     bool
		wantTimeKept    bool
		wantObservedGen int64
	}{
		{"nothing changed", metav1.ConditionFalse, "error", "no template", false, true, 1},
		{"message changed", metav1.ConditionFalse, "error", "no workload", true, true, 2},
		{"status changed", metav1.ConditionTrue, v1beta1.AttributesSetSuccessfullyReason, "ready", true, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuffer("apps", "warm", v1beta1.CapacityBufferSpec{})
			setCondition(b, v1beta1.ReadyForProvisioningCondition, metav1.ConditionFalse, "error", "no template")
			first := *meta.FindStatusCondition(b.Status.Conditions, v1beta1.ReadyForProvisioningCondition)
			first.LastTransitionTime = metav1.NewTime(first.LastTransitionTime.Add(-time.Hour))
			b.Status.Conditions[0] = first
			if tc.wantChanged {
				b.Generation = 2
			}
			if got := setCondition(b, v1beta1.ReadyForProvisioningCondition, tc.status, tc.reason, tc.msg); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			c := meta.FindStatusCondition(b.Status.Conditions, v1beta1.ReadyForProvisioningCondition)
			if kept := c.LastTransitionTime.Equal(&first.LastTransitionTime); kept != tc.wantTimeKept {
				t.Errorf("transition time kept = %v, want %v", kept, tc.wantTimeKept)
			}
			if c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.msg || c.ObservedGeneration != tc.wantObservedGen {
				t.Errorf("condition %+v", c)
			}
		})
	}
}
