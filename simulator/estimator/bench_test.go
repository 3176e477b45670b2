package estimator

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// BenchmarkEstimate packs 5,000 pending pods in 50 equivalence groups onto
// 8-cpu template nodes (with a DaemonSet pod each) next to a 1,000-node
// cluster running 10,000 pods. "antiaffinity" makes every tenth group
// one-per-host, the case that opens a node per pod.
func BenchmarkEstimate(b *testing.B) {
	c := testChecker(b)
	var nodes []*apiv1.Node
	var running []*apiv1.Pod
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("node-%04d", i)
		nodes = append(nodes, Node(name, 8000, 32*GiB))
		for j := 0; j < 10; j++ {
			p := BoundPod(fmt.Sprintf("%s-%d", name, j), 100, 256*MiB, name)
			running = append(running, p)
		}
	}
	s := cluster(b, nodes, running)
	tmpl, err := simulator.SanitizedTemplateNodeInfo(framework.NewNodeInfo(Node("pool", 8000, 32*GiB)), "template",
		[]*appsv1.DaemonSet{DaemonSet("agent", 200, 128*MiB)}, c)
	if err != nil {
		b.Fatal(err)
	}
	for _, anti := range []bool{false, true} {
		var pending []*apiv1.Pod
		for g := 0; g < 50; g++ {
			pods := ReplicaSetPods(fmt.Sprintf("pending-%02d", g), 100, 100+int64(g)*20, 256*MiB)
			if anti && g%10 == 0 {
				for _, p := range pods {
					WithAntiAffinity(p, apiv1.LabelHostname)
				}
			}
			pending = append(pending, pods...)
		}
		groups := simulator.GroupPods(pending)
		name := "plain"
		if anti {
			name = "antiaffinity"
		}
		b.Run(name, func(b *testing.B) {
			e := NewBinpackingEstimator(c, s)
			var n, placed int
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var pods []*apiv1.Pod
				n, pods = e.Estimate(groups, tmpl, 1000)
				placed = len(pods)
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/estimate")
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*len(pending)), "µs/pod")
			b.ReportMetric(float64(n), "nodes")
			b.ReportMetric(float64(placed), "placed")
		})
	}
}
