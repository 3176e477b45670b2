package simulator

import (
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// benchCluster returns nodes of 8 cpu / 32 GiB over three zones, each running
// podsPerNode pods of 0.1 cpu from 20 ReplicaSets.
func benchCluster(b *testing.B, nodes, podsPerNode int) *ClusterSnapshot {
	b.Helper()
	var ns []*apiv1.Node
	var ps []*apiv1.Pod
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%04d", i)
		ns = append(ns, WithLabel(Node(name, 8000, 32*GiB), apiv1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%3)))
		for j := 0; j < podsPerNode; j++ {
			rs := fmt.Sprintf("rs-%d", (i+j)%20)
			p := BoundPod(fmt.Sprintf("%s-%d", name, j), 100, 256*MiB, name)
			p.Labels["app"] = rs
			OwnedBy(p, "ReplicaSet", rs, types.UID(rs))
			ps = append(ps, p)
		}
	}
	s := NewClusterSnapshot()
	if err := s.SetClusterState(ns, ps); err != nil {
		b.Fatal(err)
	}
	return s
}

func reportPerOp(b *testing.B, start time.Time, ops int, unit string) {
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(ops), unit)
}

// BenchmarkCheckPredicates times one pod-fits-node check (PreFilter + Filter) on
// a 100- and a 1000-node snapshot, for a plain pod and for one with zone
// spread and hostname anti-affinity (the plugins whose PreFilter scans all
// nodes).
func BenchmarkCheckPredicates(b *testing.B) {
	c := testChecker(b)
	for _, nodes := range []int{100, 1000} {
		s := benchCluster(b, nodes, 10)
		plain := Pod("plain", 500, GiB)
		constrained := Pod("constrained", 500, GiB)
		constrained.Labels["app"] = "solo"
		WithTopologySpread(constrained, apiv1.LabelTopologyZone, 5)
		WithAntiAffinity(constrained, apiv1.LabelHostname)
		for _, tc := range []struct {
			name string
			pod  *apiv1.Pod
		}{{"plain", plain}, {"spread+antiaffinity", constrained}} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, tc.name), func(b *testing.B) {
				target := "node-0042"
				if err := c.CheckPredicates(s, tc.pod, target); err != nil {
					b.Fatalf("pod should fit: %v", err)
				}
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					_ = c.CheckPredicates(s, tc.pod, target)
				}
				reportPerOp(b, start, b.N, "µs/check")
			})
		}
	}
}

// BenchmarkTrySchedulePods schedules 5,000 pending pods in 50 equivalence groups onto
// 1,000 nodes (10 pods each), inside a Fork reverted after each round. In
// "spread" every tenth group has a zone spread constraint: PodTopologySpread's
// PreFilter then counts matching pods on every node for each such pod, which
// is the framework's own cost.
func BenchmarkTrySchedulePods(b *testing.B) {
	c := testChecker(b)
	s := benchCluster(b, 1000, 10)
	for _, spread := range []bool{false, true} {
		var pending []*apiv1.Pod
		for g := 0; g < 50; g++ {
			pods := ReplicaSetPods(fmt.Sprintf("pending-%02d", g), 100, 200+int64(g)*10, 256*MiB)
			if spread && g%10 == 0 {
				for _, p := range pods {
					WithTopologySpread(p, apiv1.LabelTopologyZone, 1)
				}
			}
			pending = append(pending, pods...)
		}
		name := "plain"
		if spread {
			name = "spread"
		}
		b.Run(name, func(b *testing.B) {
			var scheduled int
			start := time.Now()
			for i := 0; i < b.N; i++ {
				s.Fork()
				sp, _, err := TrySchedulePods(c, s, pending)
				if err != nil {
					b.Fatal(err)
				}
				scheduled = len(sp)
				s.Revert()
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/round")
			reportPerOp(b, start, b.N*len(pending), "µs/pod")
			b.ReportMetric(float64(scheduled), "scheduled")
		})
	}
}

// BenchmarkForkRevert measures the cost of a what-if that touches one node of 1,000.
func BenchmarkForkRevert(b *testing.B) {
	s := benchCluster(b, 1000, 10)
	p := Pod("x", 100, MiB)
	b.Run("AddPod", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.Fork()
			if err := s.AddPod(p, "node-0500"); err != nil {
				b.Fatal(err)
			}
			s.Revert()
		}
	})
	b.Run("AddEquivalentPod", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.Fork()
			if err := s.AddEquivalentPod(p, p, "node-0500"); err != nil {
				b.Fatal(err)
			}
			s.Revert()
		}
	})
}
