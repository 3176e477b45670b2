package actuation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// DelayDeletionAnnotationPrefix starts the node annotations that hold a
// node's deletion (after its drain) until they go, for up to
// --node-deletion-delay-timeout: a controller that must finish work on the
// node first sets one. The name is upstream's.
const DelayDeletionAnnotationPrefix = "delay-deletion.cluster-autoscaler.kubernetes.io/"

const (
	// taintSeenTimeout bounds the wait for the informer to show the
	// taints whose latency --dynamic-node-delete-delay-after-taint-enabled
	// measures; pastLatencyTTL is how long a measurement counts (both
	// upstream's).
	taintSeenTimeout = 30 * time.Second
	pastLatencyTTL   = time.Hour
	taintSeenPoll    = 50 * time.Millisecond
	// markWorkers bounds the ToBeDeleted taint updates in flight at once
	// (upstream's maxConcurrentNodesTainting).
	markWorkers = 5
)

// markNodes taints the nodes ToBeDeletedByClusterAutoscaler, giving back
// (fail) those it cannot taint, and returns the tainted ones with the wait
// before any of them may be checked for arrived pods and deleted:
// --node-delete-delay-after-taint, or with
// --dynamic-node-delete-delay-after-taint-enabled twice the longest time a
// taint took to reach the node informer over the past hour, as upstream
// (three round trips to the API server in all, counting the taint's own).
// The wait lets a pod the scheduler bound before it saw the taint show up.
func (a *Actuator) markNodes(ctx context.Context, nodes []*scaledown.UnneededNode) ([]*scaledown.UnneededNode, time.Duration) {
	var probe *taintProbe
	if a.opts.DynamicNodeDeleteDelayAfterTaintEnabled && a.deps.Nodes != nil {
		probe = a.startTaintProbe(ctx)
	}
	// The updates run together, as upstream's do: the client's QPS limiter
	// alone paces them, and a batch within its burst costs a round trip or
	// two instead of one a node.
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, markWorkers)
	var wg sync.WaitGroup
	for i, u := range nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			probe.started(u.Node.Name)
			errs[i] = a.markNode(ctx, u.Node)
		})
	}
	wg.Wait()
	var tainted []*scaledown.UnneededNode
	for i, u := range nodes {
		if errs[i] != nil {
			probe.forget(u.Node.Name)
			a.fail(ctx, u.Node, scaledown.FailedAPICall, errs[i])
			a.deps.Removals.Ended(u.Node.Name, deletiontracker.Failed)
			continue
		}
		tainted = append(tainted, u)
	}
	delay := a.opts.NodeDeleteDelayAfterTaint
	if probe != nil {
		if latency, ok := probe.await(); ok {
			delay = 2 * a.latencies.add(a.clock.Now(), latency)
		}
	}
	return tainted, delay
}

// waitAfterTaint waits delay (ctx permitting) and reports whether the
// removals may go on.
func (a *Actuator) waitAfterTaint(ctx context.Context, delay time.Duration, names []string) bool {
	if a.onDelayAfterTaint != nil {
		a.onDelayAfterTaint(delay)
	}
	if delay <= 0 {
		return true
	}
	klog.InfoS("Scale-down: waiting after tainting before checking and deleting (--node-delete-delay-after-taint)", "delay", delay, "nodes", strings.Join(names, ", "))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(delay):
		return true
	}
}

// waitForDelayDeletion waits, when the node carried a delay-deletion
// annotation as planned, until the informer shows none, or
// --node-deletion-delay-timeout has passed (then the node goes anyway, as
// upstream). An error means the node could not be read.
func (a *Actuator) waitForDelayDeletion(ctx context.Context, n *apiv1.Node) error {
	timeout := a.opts.NodeDeletionDelayTimeout
	if timeout <= 0 || !hasDelayDeletionAnnotation(n) || a.deps.Nodes == nil {
		return nil
	}
	klog.InfoS("Scale-down: waiting for the node's delay-deletion annotations to go", "node", klog.KObj(n), "annotations", delayDeletionAnnotations(n), "timeout", timeout)
	deadline := a.clock.Now().Add(timeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.podGoneCheckInterval):
		}
		fresh, err := a.deps.Nodes.Get(n.Name)
		if err != nil {
			return fmt.Errorf("reading the node for its delay-deletion annotations: %w", err)
		}
		if !hasDelayDeletionAnnotation(fresh) {
			klog.V(2).InfoS("Scale-down: delay-deletion annotations gone", "node", klog.KObj(n))
			return nil
		}
		if !a.clock.Now().Before(deadline) {
			klog.InfoS("Scale-down: delay-deletion annotations still on the node after --node-deletion-delay-timeout; deleting it anyway", "node", klog.KObj(n), "annotations", delayDeletionAnnotations(fresh), "timeout", timeout)
			return nil
		}
	}
}

func hasDelayDeletionAnnotation(n *apiv1.Node) bool { return len(delayDeletionAnnotations(n)) > 0 }

func delayDeletionAnnotations(n *apiv1.Node) []string {
	var out []string
	for k := range n.Annotations {
		if strings.HasPrefix(k, DelayDeletionAnnotationPrefix) {
			out = append(out, k)
		}
	}
	return out
}

// latencies keeps the taint latencies measured over the past hour.
type latencies struct {
	mu      sync.Mutex
	samples []latencySample
}

type latencySample struct {
	at time.Time
	d  time.Duration
}

// add records a measurement taken at now, drops those older than an hour
// and returns the longest left.
func (l *latencies) add(now time.Time, d time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, latencySample{now, d})
	kept := l.samples[:0]
	var longest time.Duration
	for _, s := range l.samples {
		if now.Sub(s.at) >= pastLatencyTTL {
			continue
		}
		kept = append(kept, s)
		longest = max(longest, s.d)
	}
	l.samples = kept
	return longest
}

// taintProbe measures, for each node tainted, the time from the start of
// its taint's update to the node informer showing the taint: what the
// scheduler's own informer needs too.
type taintProbe struct {
	a          *Actuator
	mu         sync.Mutex
	start      map[string]time.Time
	seen       map[string]time.Time
	stop, done chan struct{}
}

func (a *Actuator) startTaintProbe(ctx context.Context) *taintProbe {
	p := &taintProbe{a: a, start: map[string]time.Time{}, seen: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			p.poll()
			select {
			case <-ctx.Done():
				return
			case <-p.stop:
				return
			case <-time.After(taintSeenPoll):
			}
		}
	}()
	return p
}

func (p *taintProbe) started(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start[name] = p.a.clock.Now()
}

func (p *taintProbe) forget(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.start, name)
}

// poll notes the nodes whose taint the informer shows, and reports whether
// every started node's is seen.
func (p *taintProbe) poll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.start {
		if _, ok := p.seen[name]; ok {
			continue
		}
		if n, err := p.a.deps.Nodes.Get(name); err == nil && clusterstate.HasToBeDeletedTaint(n) {
			p.seen[name] = p.a.clock.Now()
		}
	}
	return len(p.seen) >= len(p.start)
}

// await waits until every tainted node's taint is seen, up to 30 s, and
// returns the longest latency; false when some were not seen in time (the
// static delay then applies, as upstream).
func (p *taintProbe) await() (time.Duration, bool) {
	deadline := time.Now().Add(taintSeenTimeout)
	defer func() { close(p.stop); <-p.done }()
	for {
		if p.poll() {
			break
		}
		if time.Now().After(deadline) {
			klog.ErrorS(nil, "Scale-down: the node informer did not show the ToBeDeleted taint in time; keeping --node-delete-delay-after-taint", "timeout", taintSeenTimeout, "delay", p.a.opts.NodeDeleteDelayAfterTaint)
			return 0, false
		}
		time.Sleep(taintSeenPoll)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var longest time.Duration
	for name, s := range p.start {
		longest = max(longest, p.seen[name].Sub(s))
	}
	klog.V(2).InfoS("Scale-down: taint latency measured (--dynamic-node-delete-delay-after-taint-enabled)", "nodes", len(p.start), "longest", longest)
	return longest, true
}
