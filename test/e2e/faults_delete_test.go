package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Deletes whose answers are lost (issue 31): DigitalOcean applies a DELETE of
// a node or a pool and the autoscaler hears a 502, or the autoscaler dies
// while a pool it deleted drains. The pool and the node must go, and no node
// the autoscaler tainted may lose its taint while it exists: evicted pods
// would land on a node DOKS is deleting.

// watchUntaints records, until the test ends, every Node that carried
// ToBeDeletedByClusterAutoscaler and was then seen without it while it
// still existed. It polls every 100ms.
func (s *scenario) watchUntaints() func() []string {
	var mu sync.Mutex
	var untainted []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tainted := map[string]bool{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if l, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{}); err == nil {
				for _, n := range l.Items {
					has := slices.ContainsFunc(n.Spec.Taints, func(t apiv1.Taint) bool { return t.Key == ToBeDeletedTaint })
					if tainted[n.Name] && !has {
						mu.Lock()
						untainted = append(untainted, n.Name)
						mu.Unlock()
					}
					tainted[n.Name] = has
				}
			}
			select {
			case <-stop:
				return
			case <-s.ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	s.t.Cleanup(func() { once.Do(func() { close(stop) }); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(untainted)
	}
}

// (b) A node DELETE and a pool DELETE both applied by DigitalOcean and both
// answered 502: the node and the created pool go, each DELETE is sent once
// (the listing shows it was applied), no node is given back while it
// exists, and no removal is reported failed.
func TestDeletesAppliedButAnswered502(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("work", 2, 1, 3)}, bootDelay: time.Second, deleteDelay: 4 * time.Second})
	untainted := s.watchUntaints()
	for _, op := range []string{doks.OpDeleteNode, doks.OpDeleteNodePool} {
		s.sb.DOKS.InjectFault(doks.Fault{Operation: op, Status: 502, Applied: true, Times: 1})
	}
	ca := s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", "m-*"))

	// The work pool's second node is empty: removed with a node DELETE.
	s.waitTarget("work", 1, 90*time.Second)
	s.waitNodes("work", 1, 90*time.Second)

	// A pod only a created pool fits, then gone: the pool is deleted in
	// place of its last node.
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))
	p := s.waitCreatedPool(60 * time.Second)
	s.waitRunning("mem", 1, 60*time.Second)
	if err := s.kube.AppsV1().Deployments(s.ns).Delete(s.ctx, "mem", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("the created pool gone", 90*time.Second, func() error {
		if c := s.createdPools(); len(c) != 0 {
			return fmt.Errorf("pool %s still there with %d nodes", c[0].Name, len(c[0].Nodes))
		}
		return nil
	})
	s.waitNodes(p.Name, 0, 30*time.Second)

	if n := s.sb.DOKS.RequestCount(doks.OpDeleteNode); n != 1 {
		t.Errorf("%d node DELETEs, want 1: the 502 was settled by listing, not by sending it again", n)
	}
	if n := s.sb.DOKS.RequestCount(doks.OpDeleteNodePool); n != 1 {
		t.Errorf("%d pool DELETEs, want 1", n)
	}
	if u := untainted(); len(u) != 0 {
		t.Errorf("nodes given back (untainted) while DOKS deleted them: %v", u)
	}
	if ev := s.events("ScaleDownFailed"); len(ev) != 0 {
		t.Errorf("removals reported failed: %v", ev[0].Message)
	}
	if n := s.metric(ca, "cluster_autoscaler_deleted_node_groups_total", nil); n != 1 {
		t.Errorf("deleted_node_groups_total = %v, want 1", n)
	}
	if _, ok := s.sb.Pool("work"); !ok {
		t.Error("the hand-made pool work is gone")
	}
}

// (d) The autoscaler is killed (no chance to clean up) right after it
// deleted a pool it created, while DOKS drains the pool's node. The one
// started after it, which does not remember the deletion, tells it from
// the listing: the node keeps its taint until it is gone, the pool is
// never turned back into a node group (nothing asked of it again), and
// the pool goes.
func TestKilledWhileACreatedPoolDrains(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("work", 1, 1, 2)}, bootDelay: time.Second, deleteDelay: 20 * time.Second})
	untainted := s.watchUntaints()
	cloudConfig := "--cloud-config=" + s.napConfig("", "s-*", "m-*")
	first := s.startAutoscaler(napFlag, cloudConfig)
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))
	p := s.waitCreatedPool(60 * time.Second)
	s.waitRunning("mem", 1, 60*time.Second)
	if err := s.kube.AppsV1().Deployments(s.ns).Delete(s.ctx, "mem", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("the created pool deleted", 60*time.Second, func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpDeleteNodePool); n != 1 {
			return fmt.Errorf("%d pool DELETEs", n)
		}
		return nil
	})
	first.Kill()
	killed := len(s.sb.DOKS.Changes())
	if tainted := s.taintedNodes(); len(tainted) != 1 {
		t.Fatalf("tainted nodes when the autoscaler was killed: %v, want the created pool's one", tainted)
	}

	s.startAutoscaler(napFlag, cloudConfig)
	s.eventually("the created pool gone", 60*time.Second, func() error {
		if c := s.createdPools(); len(c) != 0 {
			return fmt.Errorf("pool %s still there with %d nodes", c[0].Name, len(c[0].Nodes))
		}
		return nil
	})
	s.waitNodes(p.Name, 0, 30*time.Second)
	if u := untainted(); len(u) != 0 {
		t.Errorf("nodes given back (untainted) while DOKS deleted them: %v", u)
	}
	for _, c := range s.sb.DOKS.Changes()[killed:] {
		if c.Pool == p.ID {
			t.Errorf("the restarted autoscaler asked %s of the pool being deleted", c.Op)
		}
	}
}
