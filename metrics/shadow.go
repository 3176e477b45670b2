package metrics

import "github.com/prometheus/client_golang/prometheus"

// Shadow mode metrics (--shadow; docs/shadow-mode.md): this project's own
// (upstream has no dry run). The scale-up, scale-down and consolidation
// metrics keep counting decisions in shadow mode; these say that they were
// not carried out.
var (
	shadowMode = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: caNamespace, Name: "shadow_mode",
		Help: "1 when the autoscaler runs in shadow mode (--shadow): it decides and records, and changes neither the cloud nor the cluster's nodes and pods; 0 otherwise.",
	})
	shadowWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: caNamespace, Name: "shadow_writes_total",
		Help: "Writes shadow mode did not carry out, by API (cloud: not sent; kubernetes: sent with dryRun=All) and operation.",
	}, []string{"api", "operation"}) // api: shadowkube.APICloud or APIKubernetes
)

func shadowCollectors() []prometheus.Collector {
	return []prometheus.Collector{shadowMode, shadowWrites}
}

// SetShadowMode sets cluster_autoscaler_shadow_mode.
func SetShadowMode(on bool) {
	if on {
		shadowMode.Set(1)
	} else {
		shadowMode.Set(0)
	}
}

// RegisterShadowWrite counts a write shadow mode did not carry out.
func RegisterShadowWrite(api, operation string) {
	shadowWrites.WithLabelValues(api, operation).Inc()
}
