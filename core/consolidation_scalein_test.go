package core

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// With --pod-deletion-cost-on-unneeded-nodes, the pods of the command
// consolidation holds get the low deletion cost, and while the requests
// fall a command ready to act waits for the ReplicaSets' scale-in: until
// the saving forgone reaches what its evictions cost. Replacing big-n0
// (web, 1.5 cpu, and leaving, 0.2 cpu) by a small node saves $6/h; an
// eviction costs $0.05, and a minute and a half of restart at big-n0's
// price share; the horizon is 4 minutes, so the requests' trend reads
// after one.
func TestConsolidationAwaitsTheScaleIn(t *testing.T) {
	setup := func(t *testing.T) *harness {
		h, _ := consolidationCluster(t, func(o *config.AutoscalingOptions) {
			o.PodDeletionCostOnUnneededNodes = true
			o.Consolidation.SavingHorizon = 4 * time.Minute
			o.Consolidation.EvictionCost = 0.05
		})
		h.createPod(test.BuildScheduledPod("leaving", 200, test.GiB/8, "web-rs", "big-n0"))
		h.runOnce(t0)
		if countEvents(h.events(), "replace 1 node(s) (big-n0) by 1") == 0 {
			t.Fatal("no command planned to replace big-n0")
		}
		return h
	}
	// scaleIn deletes a pod as its ReplicaSet would.
	scaleIn := func(h *harness, name string) {
		t.Helper()
		if err := h.kube.CoreV1().Pods("default").Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitCache("pod "+name+" gone", func() bool { _, err := h.a.cache.pods.Pods("default").Get(name); return err != nil })
	}

	t.Run("flat requests: it acts when ready", func(t *testing.T) {
		h := setup(t)
		h.runOnce(t0.Add(30 * time.Second))
		if a := h.podAnnotations("web"); a[scaledown.UnneededNodeKey] != "big-n0" || a[scaledown.PodDeletionCostKey] != scaledown.UnneededPodDeletionCost {
			t.Fatalf("web, to be evicted by the command held: annotations %v", a)
		}
		h.runOnce(t0.Add(61 * time.Second))
		if incs := increases(h.provider); strings.Join(incs, ",") != "small+1" {
			t.Fatalf("increases %v, want small+1 once ready", incs)
		}
	})

	t.Run("falling requests: it waits, then acts", func(t *testing.T) {
		h := setup(t)
		scaleIn(h, "leaving")
		h.runOnce(t0.Add(30 * time.Second))
		// Ready at 60 s; web's eviction costs $0.05 + 30 s of 1.5/8 of
		// $8/h = $0.0625, which $6/h forgoes in 37.5 s.
		for _, at := range []time.Duration{61 * time.Second, 90 * time.Second} {
			h.runOnce(t0.Add(at))
			if incs := increases(h.provider); len(incs) != 0 {
				t.Fatalf("at %s, acted while the scale-in may still empty big-n0: %v", at, incs)
			}
			if st := h.a.registry.GetStatus(t0.Add(at)).Consolidation; st == nil || st.Status != "Planned" || !strings.Contains(st.Command, "big-n0") {
				t.Fatalf("at %s, status %+v, want the command planned", at, st)
			}
		}
		h.runOnce(t0.Add(100 * time.Second))
		if incs := increases(h.provider); strings.Join(incs, ",") != "small+1" {
			t.Fatalf("increases %v, want small+1 once the saving forgone passed the eviction's cost", incs)
		}
	})

	t.Run("the scale-in empties the node: no eviction", func(t *testing.T) {
		h := setup(t)
		scaleIn(h, "leaving")
		h.runOnce(t0.Add(30 * time.Second))
		h.runOnce(t0.Add(61 * time.Second))
		scaleIn(h, "web") // the ReplicaSet deletes its pod of the lowest cost
		for at := 90 * time.Second; at <= 15*time.Minute; at += 30 * time.Second {
			h.runOnce(t0.Add(at))
		}
		if ev := h.evicts.Evictions(); len(ev) != 0 {
			t.Fatalf("evictions %v, want none", ev)
		}
		if incs := increases(h.provider); len(incs) != 0 {
			t.Fatalf("increases %v: a replacement bought for an empty node", incs)
		}
		calls := h.provider.CallsOf("DeleteNodes")
		if len(calls) != 1 || !strings.Contains(strings.Join(calls[0].Nodes, ","), "big-n0") {
			t.Fatalf("DeleteNodes calls %+v, want big-n0 removed empty", calls)
		}
	})
}
