package core

import (
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// Node termination as upstream: the node is cordoned (with the taint) first,
// then its DaemonSet pod gets an eviction (--daemonset-eviction-for-occupied-nodes,
// default true) along with its other pods, then the node is deleted.
func TestDrainCordonsThenEvictsDaemonSetPods(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dsEvicted bool
		cordon    bool
	}{{"defaults", true, true}, {"no DaemonSet eviction, no cordon", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, objs, _ := scaleDownFixture(1)
			ds := test.BuildDaemonSetPod("agent", 10, test.MiB, "agent", "g1-n1")
			o := testOptions()
			o.DaemonSetEvictionForOccupiedNodes = tc.dsEvicted
			o.CordonNodeBeforeTerminate = tc.cordon
			h := newHarness(t, o, p, append(objs, ds)...)
			var order []string
			h.kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if n := a.(k8stesting.UpdateAction).GetObject().(*apiv1.Node); n.Name == "g1-n1" && n.Spec.Unschedulable {
					order = append(order, "cordon")
				}
				return false, nil, nil
			})
			h.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "eviction" {
					order = append(order, "evict "+a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string }).GetName())
				}
				return false, nil, nil
			})
			h.runOnce(t0)
			h.runOnce(t0.Add(11 * time.Minute))
			if d := deletions(p); len(d) != 2 {
				t.Fatalf("DeleteNodes calls = %v", d)
			}
			want := "[evict light]"
			if tc.cordon && tc.dsEvicted {
				want = "[cordon evict light evict agent]"
			}
			got := fmt.Sprint(order)
			if tc.cordon && tc.dsEvicted && got != want && got != "[cordon evict agent evict light]" {
				t.Fatalf("order = %s, want %s", got, want)
			}
			if !tc.cordon && got != want {
				t.Fatalf("order = %s, want %s", got, want)
			}
		})
	}
}
