package actuation

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// removal is a synchronous actuator on a cluster, with what it reports.
type removal struct {
	a        *Actuator
	kube     *sdtest.Kube
	reported *sdtest.Outcomes
	outcomes map[string]deletiontracker.Outcome
}

// newRemoval serves c on a fake clientset and returns an actuator with
// opts, the cluster's drain rules and PodDisruptionBudgets.
func newRemoval(c *sdtest.Cluster, opts config.AutoscalingOptions) *removal {
	r := &removal{kube: sdtest.NewKube(c.Objects()...), reported: &sdtest.Outcomes{}, outcomes: map[string]deletiontracker.Outcome{}}
	tracker := deletiontracker.New(func(node, _ string, o deletiontracker.Outcome) { r.outcomes[node] = o })
	r.a = New(opts, Deps{Kube: r.kube, Provider: c.Provider, Outcomes: r.reported,
		DrainOptions: sdtest.DrainOptions(opts), Removals: tracker,
		PDBs: func() ([]*policyv1.PodDisruptionBudget, error) { return c.PDBs, nil },
	}, Synchronous(), WithPacing(5*time.Millisecond, 5*time.Millisecond))
	return r
}

// planned is the planner's verdict on a node of c: drained of the pods
// bound to it that are not DaemonSet pods, or empty when there are none.
func planned(c *sdtest.Cluster, name string) *scaledown.UnneededNode {
	u := &scaledown.UnneededNode{Node: c.Node(name), GroupID: "g1", Since: sdtest.T0}
	for _, p := range c.Pods {
		if p.Spec.NodeName == name && !slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "DaemonSet" }) {
			u.PodsToEvict = append(u.PodsToEvict, p)
		}
	}
	u.Empty = len(u.PodsToEvict) == 0
	return u
}

func (r *removal) tainted(t *testing.T, name string) bool {
	t.Helper()
	return clusterstate.HasToBeDeletedTaint(getNode(t, r.kube.Clientset, name))
}

// Node termination as upstream: the node is cordoned (with the taint) first,
// then its DaemonSet pod gets an eviction (--daemonset-eviction-for-occupied-nodes,
// default true) along with its other pods, then the node is deleted.
func TestDrainCordonsThenEvictsDaemonSetPods(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dsEvicted bool
		cordon    bool
		want      []string // either order of the evictions
	}{
		{"defaults", true, true, []string{"[cordon evict light evict agent]", "[cordon evict agent evict light]"}},
		{"no DaemonSet eviction, no cordon", false, false, []string{"[evict light]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("g1", 0, 2)
			c.Pod("light", 200, "rs-light", "g1-n1")
			c.Pods = append(c.Pods, test.BuildDaemonSetPod("agent", 10, test.MiB, "agent", "g1-n1"))
			opts := sdtest.Options()
			opts.DaemonSetEvictionForOccupiedNodes = tc.dsEvicted
			opts.CordonNodeBeforeTerminate = tc.cordon
			r := newRemoval(c, opts)
			var order []string
			r.kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if n := a.(k8stesting.UpdateAction).GetObject().(*apiv1.Node); n.Name == "g1-n1" && n.Spec.Unschedulable {
					order = append(order, "cordon")
				}
				return false, nil, nil
			})
			r.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "eviction" {
					order = append(order, "evict "+a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name)
				}
				return false, nil, nil
			})

			r.a.Drain(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n1")})

			if d := sdtest.Deletions(c.Provider); !slices.Equal(d, []string{"g1:g1-n1"}) {
				t.Fatalf("DeleteNodes calls = %v, want g1-n1", d)
			}
			if got := fmt.Sprint(order); !slices.Contains(tc.want, got) {
				t.Fatalf("order = %s, want %s", got, tc.want[0])
			}
		})
	}
}

// A bare pod below --expendable-pods-priority-cutoff neither blocks the
// drain nor is evicted: it goes with the node.
func TestDrainLeavesExpendablePods(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 2)
	c.Pod("light", 200, "rs-light", "g1-n1")
	u := planned(c, "g1-n1")
	c.Pod("batch", 100, "", "g1-n1").Spec.Priority = ptr.To[int32](-100)
	r := newRemoval(c, sdtest.Options())

	r.a.Drain(context.Background(), []*scaledown.UnneededNode{u})

	if ev := r.kube.Evictions(); !slices.Equal(ev, []string{"default/light"}) {
		t.Fatalf("evictions = %v, want only default/light", ev)
	}
	if d := sdtest.Deletions(c.Provider); !slices.Equal(d, []string{"g1:g1-n1"}) {
		t.Fatalf("DeleteNodes calls = %v, want g1-n1", d)
	}
}

// Before evicting, the drain checks the node's pods again with the drain
// rules the planner used: a kube-system pod may go when a PDB covers it or
// once it is older than --blocking-system-pod-distruption-timeout.
func TestDrainChecksSystemPodsAsThePlan(t *testing.T) {
	cases := []struct {
		name    string
		age     time.Duration
		pdb     bool
		drained bool
	}{
		{name: "covered by a PDB", age: time.Minute, pdb: true, drained: true},
		{name: "older than the timeout", age: 21 * time.Minute, drained: true},
		{name: "younger than the timeout, no PDB", age: 19 * time.Minute, drained: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("g1", 0, 2)
			dns := c.Pod("dns", 200, "rs-dns", "g1-n1")
			dns.Namespace, dns.Labels = metav1.NamespaceSystem, map[string]string{"app": "dns"}
			dns.CreationTimestamp = metav1.NewTime(time.Now().Add(-tc.age))
			if tc.pdb {
				c.PDB(metav1.NamespaceSystem, "dns", 1)
			}
			opts := sdtest.Options()
			opts.BspDisruptionTimeout = 20 * time.Minute
			r := newRemoval(c, opts)

			r.a.Drain(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n1")})

			wantDeleted, wantEvicted, wantOutcome := []string(nil), []string(nil), deletiontracker.Failed
			if tc.drained {
				wantDeleted, wantEvicted, wantOutcome = []string{"g1:g1-n1"}, []string{"kube-system/dns"}, deletiontracker.Deleted
			}
			if d := sdtest.Deletions(c.Provider); !slices.Equal(d, wantDeleted) {
				t.Errorf("DeleteNodes calls = %v, want %v", d, wantDeleted)
			}
			if ev := r.kube.Evictions(); !slices.Equal(ev, wantEvicted) {
				t.Errorf("evictions = %v, want %v", ev, wantEvicted)
			}
			if r.outcomes["g1-n1"] != wantOutcome {
				t.Errorf("outcome = %v, want %v", r.outcomes["g1-n1"], wantOutcome)
			}
		})
	}
}

// A drain whose evictions stay refused (a PodDisruptionBudget) until
// --max-pod-eviction-time gives the node back: no deletion, the taint
// removed, a ScaleDownFailed event, and the tracker hears a failure (which
// starts --scale-down-delay-after-failure).
func TestFailedDrainGivesNodeBack(t *testing.T) {
	c := sdtest.NewCluster("g1", 0, 2)
	c.Pod("light", 200, "rs-light", "g1-n1")
	r := newRemoval(c, sdtest.Options())
	r.kube.Refuse(func(string, string) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	})

	r.a.Drain(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n1")})

	if d := sdtest.Deletions(c.Provider); len(d) != 0 {
		t.Fatalf("node deleted despite a failed drain: %v", d)
	}
	if ev := r.kube.Evictions(); len(ev) < 2 {
		t.Fatalf("eviction not retried: %v", ev)
	}
	if r.tainted(t, "g1-n1") {
		t.Error("taint left on a node whose drain failed")
	}
	// One failure reported (the reporter makes it one ScaleDownFailed
	// event: core/report's tests).
	if f := r.reported.Failures(); len(f) != 1 || f[0].Node.Name != "g1-n1" {
		t.Errorf("removal failures reported = %v, want one for g1-n1", f)
	}
	if r.outcomes["g1-n1"] != deletiontracker.Failed {
		t.Errorf("outcome = %v, want Failed", r.outcomes["g1-n1"])
	}
}

// A pod bound to an empty node just before its taint, and not yet in any
// cache, keeps the node, whatever kind of pod it is: the node is untainted
// and its removal ends as kept.
func TestDeleteEmptyKeepsNodeWhenPodArrives(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*apiv1.Pod)
	}{
		{name: "replicated pod", modify: func(*apiv1.Pod) {}},
		{name: "bare pod", modify: func(p *apiv1.Pod) { p.OwnerReferences = nil }},
		{name: "safe-to-evict=false", modify: func(p *apiv1.Pod) {
			p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sdtest.NewCluster("g1", 0, 2)
			r := newRemoval(c, sdtest.Options())
			late := test.BuildScheduledPod("late", 100, test.MiB, "rs-late", "g1-n1")
			tc.modify(late)
			added := false
			// Reactors run under the fake clientset's lock: the pod goes
			// straight into its tracker.
			r.kube.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
				n := action.(k8stesting.UpdateAction).GetObject().(*apiv1.Node)
				if n.Name == "g1-n1" && clusterstate.HasToBeDeletedTaint(n) && !added {
					added = true
					if err := r.kube.Tracker().Add(late.DeepCopy()); err != nil {
						t.Error(err)
					}
				}
				return false, nil, nil
			})

			r.a.DeleteEmpty(context.Background(), []*scaledown.UnneededNode{planned(c, "g1-n1")})

			if d := sdtest.Deletions(c.Provider); len(d) != 0 {
				t.Fatalf("DeleteNodes calls = %v, want none: a pod arrived", d)
			}
			if _, err := r.kube.CoreV1().Pods("default").Get(context.Background(), "late", metav1.GetOptions{}); err != nil {
				t.Errorf("the pod that arrived: %v", err)
			}
			if r.tainted(t, "g1-n1") {
				t.Error("the kept node is still tainted")
			}
			if r.outcomes["g1-n1"] != deletiontracker.Kept {
				t.Errorf("outcome = %v, want Kept", r.outcomes["g1-n1"])
			}
		})
	}
}
