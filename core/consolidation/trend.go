package consolidation

import (
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/utilization"
)

// Resources is an amount of cpu (milli-cores) and memory (milli-bytes, as
// utilization.Requests counts it).
type Resources struct {
	MilliCPU, MilliMemory int64
}

func (r Resources) Plus(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.MilliMemory + o.MilliMemory}
}

func (r Resources) minus(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.MilliMemory - o.MilliMemory}
}

func (r Resources) times(n int) Resources {
	return Resources{r.MilliCPU * int64(n), r.MilliMemory * int64(n)}
}

// Allocatable is node's allocatable cpu and memory.
func Allocatable(node *apiv1.Node) Resources {
	a := node.Status.Allocatable
	return Resources{a.Cpu().MilliValue(), a.Memory().MilliValue()}
}

// Requested is what pods request, scheduled or pending, finished pods left
// out, each pod's requests from cache.
func Requested(pods []*apiv1.Pod, cache *utilization.RequestsCache) Resources {
	var r Resources
	for _, p := range pods {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		req := cache.Get(p)
		r.MilliCPU += req.MilliCPU
		r.MilliMemory += req.MilliMemory
	}
	cache.Sweep()
	return r
}

// Demand is one loop's reading of the cluster: what its pods request and
// what its live nodes offer.
type Demand struct {
	Requested, Allocatable Resources
}

// Trend keeps the cluster's requests over the last window, so that a
// saving is not expected to outlast the growth that will buy its room
// back: on a rising day, a node deleted at ten is bought again at eleven,
// and the eviction bought nothing (issue 40's compressed day: a third of
// the drains were followed by a purchase in their pool within 30 minutes).
type Trend struct {
	samples []trendSample
}

type trendSample struct {
	at  time.Time
	req Resources
}

// trendSamples bounds the samples kept per window.
const trendSamples = 32

// Due tells whether a reading at now would start a new sample: the
// newest is window/trendSamples old, or there is none. A reading that is
// not due only replaces the newest sample's.
func (t *Trend) Due(now time.Time, window time.Duration) bool {
	n := len(t.samples)
	return n == 0 || now.Sub(t.samples[n-1].at) >= window/trendSamples
}

// Observe records the requests at now and forgets what is older than
// window.
func (t *Trend) Observe(now time.Time, req Resources, window time.Duration) {
	if !t.Due(now, window) {
		t.samples[len(t.samples)-1].req = req // the newest reading stands for its slot
		return
	}
	t.samples = append(t.samples, trendSample{now, req})
	drop := 0
	for drop < len(t.samples)-1 && now.Sub(t.samples[drop].at) > window {
		drop++
	}
	t.samples = t.samples[drop:]
}

// Growth is how fast the requests grew over the samples kept, per hour,
// each resource at least 0; zero until they span a quarter of window.
func (t *Trend) Growth(window time.Duration) Resources {
	d := t.change(window)
	return Resources{max(0, d.MilliCPU), max(0, d.MilliMemory)}
}

// Falling tells that the requests fell over the samples kept (spanning a
// quarter of window at least): one resource fell, and neither grew. A
// cluster whose requests fall is scaling in; its controllers delete pods.
func (t *Trend) Falling(window time.Duration) bool {
	d := t.change(window)
	return d.MilliCPU <= 0 && d.MilliMemory <= 0 && (d.MilliCPU < 0 || d.MilliMemory < 0)
}

// change is how the requests changed per hour over the samples kept; zero
// until they span a quarter of window.
func (t *Trend) change(window time.Duration) Resources {
	n := len(t.samples)
	if n < 2 {
		return Resources{}
	}
	first, last := t.samples[0], t.samples[n-1]
	span := last.at.Sub(first.at)
	if span < window/4 || span <= 0 {
		return Resources{}
	}
	d := last.req.minus(first.req)
	perHour := func(v int64) int64 { return int64(float64(v) / span.Hours()) }
	return Resources{perHour(d.MilliCPU), perHour(d.MilliMemory)}
}

// lasts is how long a command's saving lasts while the requests grow at
// growth from now: until they need the room the command leaves (the
// cluster's allocatable after it, less what is requested now); max when
// they do not grow.
func lasts(d Demand, growth Resources, cmd *Command, limit time.Duration) time.Duration {
	after := d.Allocatable
	for _, c := range cmd.Remove {
		after = after.minus(Allocatable(c.Node))
	}
	if cmd.Kind == Replace && cmd.Replacement != nil && cmd.Replacement.Template != nil {
		after = after.Plus(Allocatable(cmd.Replacement.Template.Node()).times(cmd.Count))
	}
	room := after.minus(d.Requested)
	out := limit
	for _, r := range []struct{ room, growth int64 }{{room.MilliCPU, growth.MilliCPU}, {room.MilliMemory, growth.MilliMemory}} {
		if r.growth <= 0 {
			continue
		}
		t := time.Duration(max(0, float64(r.room)/float64(r.growth)) * float64(time.Hour))
		out = min(out, t)
	}
	return out
}
