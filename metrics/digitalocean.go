package metrics

import (
	"strconv"
	"time"
)

// DOAPIObserver records DigitalOcean API calls into the
// cluster_autoscaler_digitalocean_api_* metrics. It satisfies the provider's
// CallObserver interface without importing the provider (metrics is a leaf).
type DOAPIObserver struct{}

// ObserveCall records one request attempt. statusCode is the HTTP status of the
// response; 0 means no response arrived (DNS, TLS, timeout...), which is
// counted under code="error".
func (DOAPIObserver) ObserveCall(operation string, statusCode int, duration time.Duration, err error) {
	code := "error"
	if statusCode > 0 {
		code = strconv.Itoa(statusCode)
	}
	doAPIRequests.WithLabelValues(operation, code).Inc()
	doAPIRequestDuration.WithLabelValues(operation).Observe(duration.Seconds())
}

// ObserveRateLimit records the rate-limit headers of the latest response.
// A response without them (limit 0) leaves the gauges as they were, so a
// single header-less error page does not look like an exhausted quota.
func (DOAPIObserver) ObserveRateLimit(limit, remaining int, reset time.Time) {
	if limit <= 0 {
		return
	}
	doAPIRateLimitLimit.Set(float64(limit))
	doAPIRateLimitRemaining.Set(float64(remaining))
	if !reset.IsZero() {
		doAPIRateLimitReset.Set(float64(reset.Unix()))
	}
}

// ObservePoolRefused counts a node pool refused as a node group (the
// provider's RefusalObserver).
func (DOAPIObserver) ObservePoolRefused(reason string) {
	doNodePoolsRefused.WithLabelValues(reason).Inc()
}
