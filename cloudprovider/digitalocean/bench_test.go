package digitalocean

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// BenchmarkRefreshSteadyState measures a Refresh of 45 autoscaled pools
// with warm template caches: one list request over loopback HTTP.
func BenchmarkRefreshSteadyState(b *testing.B) {
	e := newEnv(b, doks.Options{})
	for i := 0; i < 45; i++ {
		e.pool(autoscaled(fmt.Sprintf("pool-%02d", i), 3, 0, 10))
	}
	if err := e.p.Refresh(); err != nil {
		b.Fatal(err)
	}
	start := e.sim.TotalRequests()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := e.p.Refresh(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(e.sim.TotalRequests()-start)/float64(b.N), "requests/op")
	klog.Flush()
}
