package digitalocean

import "time"

// CallObserver receives one call per DigitalOcean request attempt (a
// retried call reports every attempt), e.g. to export metrics.
type CallObserver interface {
	// ObserveCall reports an attempt: operation is one of ListNodePools,
	// GetNodePoolTemplate, UpdateNodePool, DeleteNode, ListSizes; statusCode
	// is 0 when no HTTP response arrived.
	ObserveCall(operation string, statusCode int, duration time.Duration, err error)
	// ObserveRateLimit reports the rate-limit headers of a response.
	ObserveRateLimit(limit, remaining int, reset time.Time)
}

type noopObserver struct{}

func (noopObserver) ObserveCall(string, int, time.Duration, error) {}
func (noopObserver) ObserveRateLimit(int, int, time.Time)          {}

// RefusalObserver is optionally implemented by a CallObserver to count node
// pools refused as node groups: reason is "bounds" (min/max or count make
// no sense), "ids" (an ID or name with path characters) or "template" (the
// template's values make no sense). It is called once each time a pool's
// refusal starts or changes, when it is also logged.
type RefusalObserver interface {
	ObservePoolRefused(reason string)
}

func observeRefusal(o CallObserver, reason string) {
	if r, ok := o.(RefusalObserver); ok {
		r.ObservePoolRefused(reason)
	}
}
