package scaledown_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/planner"
)

// passes runs ScaleDown passes on a cluster with the real planner,
// actuator and deletion tracker, wired as core wires them.
type passes struct {
	t        *testing.T
	c        *sdtest.Cluster
	opts     config.AutoscalingOptions
	kube     *sdtest.Kube
	registry *clusterstate.Registry
	removals *deletiontracker.Tracker
	actuator *actuation.Actuator
	sd       *scaledown.ScaleDown
}

// newPasses wires ScaleDown for c; with async, removals run in their own
// goroutines as in production.
func newPasses(t *testing.T, c *sdtest.Cluster, opts config.AutoscalingOptions, async bool) *passes {
	p := &passes{t: t, c: c, opts: opts, kube: sdtest.NewKube(c.Objects()...), registry: c.Registry(t, opts, sdtest.T0)}
	p.removals = deletiontracker.New()
	options := []actuation.Option{actuation.WithPacing(5*time.Millisecond, 5*time.Millisecond)}
	if !async {
		options = append(options, actuation.Synchronous())
	}
	p.actuator = actuation.New(opts, actuation.Deps{Kube: p.kube, Provider: c.Provider, Outcomes: &sdtest.Outcomes{},
		DrainOptions: sdtest.DrainOptions(opts), Removals: p.removals}, options...)
	pl := planner.New(opts, c.Provider, p.registry, sdtest.Checker(t), sdtest.DrainOptions(opts))
	p.sd = scaledown.New(opts, p.registry, pl, p.actuator, p.removals)
	p.removals.AddListener(p.sd.RemovalEnded)
	t.Cleanup(p.actuator.Wait)
	return p
}

// run reads the cluster back from the API (taints, evicted pods) and the
// provider, then runs one pass at now.
func (p *passes) run(now time.Time) scaledown.Result {
	p.t.Helper()
	ctx := context.Background()
	nodes, err := p.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	pods, err := p.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	p.c.Nodes, p.c.Pods = nil, nil
	for i := range nodes.Items {
		p.c.Nodes = append(p.c.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		p.c.Pods = append(p.c.Pods, &pods.Items[i])
	}
	if err := p.registry.UpdateNodes(p.c.Nodes, now); err != nil {
		p.t.Fatal(err)
	}
	res, err := p.sd.RunOnce(ctx, p.c.Input(p.t, p.opts, now, p.removals.BeingDeleted()), time.Time{})
	if err != nil {
		p.t.Fatal(err)
	}
	return res
}

// --scale-down-delay-after-delete holds the next removal after one starts.
func TestDelayAfterDelete(t *testing.T) {
	cases := []struct {
		name          string
		delay         time.Duration
		within, after time.Duration // since the first removal started
	}{
		{name: "flag set", delay: 5 * time.Minute, within: 4 * time.Minute, after: 5*time.Minute + time.Second},
		// 0, the default, means no delay, as upstream 1.36: the pass that
		// follows a removal may start the next one.
		{name: "0 is no delay", delay: 0, after: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("g1", 0, 4)
			opts := sdtest.Options()
			opts.MaxScaleDownParallelism = 1
			opts.ScaleDownDelayAfterDelete = tc.delay
			p := newPasses(t, c, opts, false)
			p.run(sdtest.T0)
			start := sdtest.T0.Add(11 * time.Minute)
			p.run(start)
			if tc.within > 0 {
				if res := p.run(start.Add(tc.within)); !res.InCooldown {
					t.Errorf("pass within the delay after delete not in cooldown")
				}
				if d := sdtest.Deletions(c.Provider); len(d) != 1 {
					t.Fatalf("DeleteNodes calls within the delay after delete = %v", d)
				}
			}
			p.run(start.Add(tc.after))
			if d := sdtest.Deletions(c.Provider); len(d) != 2 {
				t.Fatalf("DeleteNodes calls after the delay = %v", d)
			}
		})
	}
}

// A failed removal starts --scale-down-delay-after-failure, and the node,
// which its removal took out of the unneeded set, starts a new unneeded
// period: it goes --scale-down-unneeded-time after it is found again.
func TestDelayAfterFailure(t *testing.T) {
	c, _ := sdtest.ThreeNodes()
	// Only n1 is a candidate: keep n2 out.
	c.Node("g1-n2").Annotations = map[string]string{scaledown.ScaleDownDisabledAnnotation: "true"}
	p := newPasses(t, c, sdtest.Options(), false)
	p.kube.Refuse(func(string, string) error { return apierrors.NewTooManyRequests("disruption budget", 1) })
	p.run(sdtest.T0)
	if res := p.run(sdtest.T0.Add(11 * time.Minute)); !slices.Equal(res.Drained, []string{"g1-n1"}) {
		t.Fatalf("drains started = %v, want g1-n1", res.Drained)
	}
	if d := sdtest.Deletions(c.Provider); len(d) != 0 {
		t.Fatalf("node deleted despite a failed drain: %v", d)
	}
	p.kube.Refuse(nil)
	if res := p.run(sdtest.T0.Add(13 * time.Minute)); !res.InCooldown || res.Started() {
		t.Fatalf("pass 2m after the failure: in cooldown %v, started %v %v; want the 3m cooldown", res.InCooldown, res.Empty, res.Drained)
	}
	if res := p.run(sdtest.T0.Add(15 * time.Minute)); res.InCooldown || res.Started() {
		t.Fatalf("pass 4m after the failure: in cooldown %v, started %v; want neither (unneeded again for 2m only)", res.InCooldown, res.Drained)
	}
	p.run(sdtest.T0.Add(23*time.Minute + time.Second))
	if d := sdtest.Deletions(c.Provider); !slices.Equal(d, []string{"g1:g1-n1"}) {
		t.Fatalf("DeleteNodes calls after the cooldown and a new unneeded time = %v", d)
	}
}

// The unneeded time is the node group's (its own option, else
// --scale-down-unneeded-time).
func TestUnneededTimeIsTheGroups(t *testing.T) {
	cases := []struct {
		name       string
		defaults   time.Duration
		group      time.Duration // 0: none of its own
		at         time.Duration
		wantRemove bool
	}{
		{name: "the flag's hour: not yet after 11m", defaults: time.Hour, at: 11 * time.Minute},
		{name: "the flag's 10m: after 11m", defaults: 10 * time.Minute, at: 11 * time.Minute, wantRemove: true},
		{name: "the group's 5m over the flag's 10m: after 6m", defaults: 10 * time.Minute, group: 5 * time.Minute, at: 6 * time.Minute, wantRemove: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("g1", 0, 2)
			c.Pod("busy", 1500, "rs-busy", "g1-n0")
			if tc.group > 0 {
				c.Provider.Group("g1").SetOptions(&config.NodeGroupAutoscalingOptions{ScaleDownUnneededTime: tc.group})
			}
			opts := sdtest.Options()
			opts.NodeGroupDefaults.ScaleDownUnneededTime = tc.defaults
			p := newPasses(t, c, opts, false)
			p.run(sdtest.T0)
			p.run(sdtest.T0.Add(tc.at))
			if got := len(sdtest.Deletions(c.Provider)) > 0; got != tc.wantRemove {
				t.Fatalf("removed after %s: %v, want %v", tc.at, got, tc.wantRemove)
			}
		})
	}
}

// --max-scale-down-parallelism bounds the removals in flight, not those
// started per pass: while two drains still run, a later pass starts none.
func TestParallelismCountsRemovalsInFlight(t *testing.T) {
	c := sdtest.LightNodes(4)
	opts := sdtest.Options()
	opts.MaxScaleDownParallelism = 2
	opts.MaxDrainParallelism = 10
	opts.MaxPodEvictionTime = time.Minute
	p := newPasses(t, c, opts, true)
	p.kube.Refuse(func(string, string) error { return apierrors.NewTooManyRequests("disruption budget", 1) })
	p.run(sdtest.T0)
	p.run(sdtest.T0.Add(11 * time.Minute))
	if n, _ := p.removals.InFlight(); n != 2 {
		t.Fatalf("removals in flight after the first removal pass = %d, want 2", n)
	}
	if res := p.run(sdtest.T0.Add(12 * time.Minute)); res.Started() {
		t.Fatalf("a pass with 2 removals in flight started %v %v", res.Empty, res.Drained)
	}
	if n, _ := p.removals.InFlight(); n != 2 {
		t.Fatalf("removals in flight after a second pass = %d, want still 2", n)
	}
	p.kube.Refuse(nil)
	p.actuator.Wait()
	if d := sdtest.Deletions(c.Provider); len(d) != 2 {
		t.Fatalf("DeleteNodes calls = %v, want 2", d)
	}
}

// A pass records nothing itself: it returns what the planner found and
// what its soft tainting did, and the registry's candidates (the status
// ConfigMap's) stay as they were until the reporter records the result.
func TestPassReturnsWhatItFound(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 3)
	opts := sdtest.Options()
	opts.MaxBulkSoftTaintCount, opts.MaxBulkSoftTaintTime = 10, time.Minute
	p := newPasses(t, c, opts, false)
	res := p.run(sdtest.T0)
	if got := res.Planned.ByGroup["g1"]; got != 3 || res.Planned.Unneeded != 3 {
		t.Errorf("planned: %+v, want 3 unneeded in g1", res.Planned)
	}
	if res.Started() {
		t.Errorf("removals started before the unneeded time: %v %v", res.Empty, res.Drained)
	}
	if res.SoftTaints == nil || len(res.SoftTaints.Tainted) != 3 {
		t.Errorf("soft taints: %+v, want the 3 unneeded nodes tainted", res.SoftTaints)
	}
	if got := p.registry.GetStatus(sdtest.T0).ClusterWide.ScaleDown.Candidates; got != 0 {
		t.Errorf("the pass wrote %d candidates to the registry itself", got)
	}

	opts.MaxBulkSoftTaintCount = 0
	p = newPasses(t, sdtest.NewCluster("g1", 0, 3), opts, false)
	if res := p.run(sdtest.T0); res.SoftTaints != nil {
		t.Errorf("soft taints with --max-bulk-soft-taint-count=0: %+v, want none", res.SoftTaints)
	}
}
