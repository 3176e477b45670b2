package provisioningrequest

import (
	"fmt"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// Upstream's fixed times (no flags): how long a Provisioned request's room
// stays booked, how long a request may wait for capacity before it Failed,
// and how long a finished request is kept before it is deleted.
const (
	BookingTime    = 10 * time.Minute
	ExpirationTime = 7 * 24 * time.Hour
	TerminalTTL    = 7 * 24 * time.Hour
	// maxUpdated bounds the expiry updates of one iteration, as upstream.
	maxUpdated = 20
	// consumerEventInterval: a consumer pod is told at most this often that
	// it triggers no scale-up of its own.
	consumerEventInterval = 10 * time.Minute
)

// TemplateGrace is how long a new request may name a PodTemplate that does
// not exist yet before it is Failed (FailedToCreatePods); upstream fails it
// at once.
const TemplateGrace = time.Minute

// Options are the --provisioning-request-* and --check-capacity-* flags.
type Options struct {
	InitialBackoff, MaxBackoff time.Duration
	BackoffCacheSize           int
	BatchProcessing            bool
	MaxBatchSize               int
	BatchTimebox               time.Duration
	ProcessorInstance          string
}

// Simulation is what the core lends a provisioning step: the iteration's
// cluster snapshot (with booked and pending pods already placed) and its
// scale-up.
type Simulation interface {
	Fork()
	Commit() error
	Revert()
	// Place places the pods that fit and returns the others.
	Place(pods []*apiv1.Pod) (unplaced []*apiv1.Pod, err error)
	// ScaleUpAllOrNothing asks for nodes for all pods or for none, and
	// says whether it asked.
	ScaleUpAllOrNothing(pods []*apiv1.Pod) (bool, error)
}

// Manager serves ProvisioningRequests. As a pod list processor it expires
// bookings, drops pending pods that consume a request, puts the booked
// pods first and picks the requests to provision this iteration; the core
// then runs CheckCapacity and ScaleUpAtomic on its simulation. It decides
// and writes nothing: what it decided (statuses, deletions, consumer
// events) collects in its Results, which the loop has a Writer apply once
// the iteration's decisions are made.
type Manager struct {
	client *Client
	pods   corelisters.PodLister
	opts   Options
	// backoff: per request UID, the wait before the next retry of a
	// request that was not Provisioned.
	backoff *lru.Cache
	// due: requests to provision this iteration (Process picks them).
	due          []due
	consumerSeen map[types.UID]time.Time
	// results: what this iteration decided, for the Writer.
	results Results
}

type due struct {
	pr   *v1.ProvisioningRequest
	pods []*apiv1.Pod
}

// NewManager returns a Manager reading requests through client.
func NewManager(client *Client, podLister corelisters.PodLister, opts Options) *Manager {
	if opts.MaxBatchSize < 1 || !opts.BatchProcessing {
		opts.MaxBatchSize = 1
	}
	return &Manager{client: client, pods: podLister, opts: opts,
		backoff: lru.New(max(opts.BackoffCacheSize, 1)), consumerSeen: map[types.UID]time.Time{}}
}

// Results returns what was decided since the iteration's Process began,
// and forgets it.
func (m *Manager) Results() Results {
	r := m.results
	m.results = Results{}
	return r
}

// Process implements fakepods.PodListProcessor. It starts an iteration: the
// results of the previous one, if nobody took them, are dropped.
func (m *Manager) Process(ctx *fakepods.Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	m.due = nil
	m.results = Results{}
	prs, err := m.client.List()
	if err != nil {
		// The loop goes on without requests rather than stopping.
		klog.ErrorS(err, "ProvisioningRequests: listing failed; none served this iteration")
		return pending, nil
	}
	prs = deepCopies(prs) // the iteration sets their conditions as it decides
	m.expire(prs, ctx.Now)
	pending = m.withoutConsumers(pending, ctx.Now)
	holders := m.booked(prs, ctx.Now)
	m.pickDue(prs, ctx.Now)
	if len(holders) == 0 {
		return pending, nil
	}
	return append(holders, pending...), nil
}

// CleanUp implements fakepods.PodListProcessor.
func (m *Manager) CleanUp() {}

// Due says which classes have a request to provision this iteration.
func (m *Manager) Due() (checkCapacity, atomic bool) {
	for _, d := range m.due {
		if d.pr.Spec.ProvisioningClassName == v1.ProvisioningClassBestEffortAtomicScaleUp {
			atomic = true
		} else {
			checkCapacity = true
		}
	}
	return checkCapacity, atomic
}

// withoutConsumers drops pods that consume a request: the request asked
// for their room, they cause no scale-up of their own.
func (m *Manager) withoutConsumers(pending []*apiv1.Pod, now time.Time) []*apiv1.Pod {
	for uid, t := range m.consumerSeen {
		if now.Sub(t) >= consumerEventInterval {
			delete(m.consumerSeen, uid)
		}
	}
	out := pending[:0:0]
	dropped := 0
	for _, p := range pending {
		name, ok := ConsumedRequest(p)
		if !ok || fakepods.IsFake(p) {
			out = append(out, p)
			continue
		}
		dropped++
		if _, recent := m.consumerSeen[p.UID]; !recent {
			m.consumerSeen[p.UID] = now
			m.results.Consumers = append(m.results.Consumers, Consumer{Pod: p, Request: name})
		}
	}
	if dropped > 0 {
		klog.V(1).InfoS("ProvisioningRequests: pending pods consume a request; they cause no scale-up of their own", "pods", dropped)
	}
	return out
}

// booked returns the fake pods that hold the room of Provisioned requests:
// a request's pods less those of its consumers already bound to a node
// (they hold their room themselves).
func (m *Manager) booked(prs []*v1.ProvisioningRequest, now time.Time) []*apiv1.Pod {
	var bound map[string]int
	var out []*apiv1.Pod
	for _, pr := range prs {
		if !Supported(pr, m.opts.ProcessorInstance) || !booked(pr) {
			continue
		}
		if bound == nil {
			bound = m.boundConsumers()
		}
		ps, err := podsFor(pr, m.client.PodTemplate)
		if err != nil {
			m.update(pr, now, condition{v1.Failed, metav1.ConditionTrue, FailedToBookCapacityReason, fmt.Sprintf("Couldn't create pods, err: %v", err)})
			continue
		}
		n := len(ps) - bound[pr.Namespace+"/"+pr.Name]
		for _, p := range ps[:max(n, 0)] {
			fakepods.MarkHoldsRoomOnly(p)
			out = append(out, p)
		}
		klog.V(4).InfoS("ProvisioningRequest: booked room held", "request", klog.KObj(pr), "pods", max(n, 0), "consumersBound", len(ps)-max(n, 0))
	}
	return out
}

// boundConsumers counts, per request (namespace/name), the consumer pods
// bound to a node and not finished.
func (m *Manager) boundConsumers() map[string]int {
	out := map[string]int{}
	all, err := m.pods.List(labels.Everything())
	if err != nil {
		return out
	}
	for _, p := range all {
		name, ok := ConsumedRequest(p)
		if !ok || p.Spec.NodeName == "" || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		out[p.Namespace+"/"+name]++
	}
	return out
}

// available says whether pr may be provisioned now, as upstream: never
// once Provisioned or Failed; when Provisioned=False, after a backoff that
// starts at InitialBackoff and doubles up to MaxBackoff.
func (m *Manager) available(pr *v1.ProvisioningRequest, now time.Time) bool {
	if terminal(pr) {
		m.backoff.Remove(pr.UID)
		return false
	}
	prov := apimeta.FindStatusCondition(pr.Status.Conditions, v1.Provisioned)
	if prov == nil {
		return true
	}
	if prov.Status != metav1.ConditionFalse {
		return false
	}
	wait := m.opts.InitialBackoff
	if v, ok := m.backoff.Get(pr.UID); ok {
		wait = v.(time.Duration)
	}
	if prov.LastTransitionTime.Add(wait).Before(now) {
		m.backoff.Add(pr.UID, min(2*wait, m.opts.MaxBackoff))
		return true
	}
	return false
}

// pickDue picks this iteration's requests: the oldest available one and,
// with --check-capacity-batch-processing, further check-capacity requests
// up to --check-capacity-provisioning-request-max-batch-size. A request
// whose pod sets cannot make pods is Failed.
func (m *Manager) pickDue(prs []*v1.ProvisioningRequest, now time.Time) {
	for _, pr := range prs {
		if !Supported(pr, m.opts.ProcessorInstance) || !m.available(pr, now) {
			continue
		}
		checkCapacity := SupportedCheckCapacity(pr, m.opts.ProcessorInstance)
		if len(m.due) > 0 && (!checkCapacity || len(m.due) >= m.opts.MaxBatchSize) {
			continue
		}
		ps, err := podsFor(pr, m.client.PodTemplate)
		if err != nil && apierrors.IsNotFound(err) && now.Sub(pr.CreationTimestamp.Time) < TemplateGrace {
			// Kueue creates the request first and its PodTemplates right
			// after; the request's event may wake the loop in between.
			klog.V(2).InfoS("ProvisioningRequest: PodTemplate not there yet; waiting for it", "request", klog.KObj(pr), "err", err)
			continue
		}
		if err != nil {
			klog.InfoS("ProvisioningRequest: invalid pod sets", "request", klog.KObj(pr), "err", err)
			m.update(pr, now, condition{v1.Failed, metav1.ConditionTrue, FailedToCreatePodsReason, err.Error()})
			continue
		}
		m.due = append(m.due, due{pr: pr, pods: ps})
		if !checkCapacity || m.opts.MaxBatchSize == 1 {
			return
		}
	}
}

// expire marks Provisioned requests whose booking ran out BookingExpired,
// requests waiting longer than ExpirationTime Failed, and deletes requests
// finished longer than TerminalTTL ago, as upstream.
func (m *Manager) expire(prs []*v1.ProvisioningRequest, now time.Time) {
	updated := 0
	for _, pr := range prs {
		if !Supported(pr, m.opts.ProcessorInstance) {
			continue
		}
		if finishedBefore(pr, now.Add(-TerminalTTL)) {
			m.results.Deletes = append(m.results.Deletes, pr)
			continue
		}
		if updated >= maxUpdated || isTrue(pr, v1.BookingExpired) || isTrue(pr, v1.Failed) {
			continue
		}
		prov := apimeta.FindStatusCondition(pr.Status.Conditions, v1.Provisioned)
		switch {
		case prov != nil && prov.Status == metav1.ConditionTrue:
			if prov.LastTransitionTime.Add(BookingTime).Before(now) {
				klog.InfoS("ProvisioningRequest: booking expired; its room is released", "request", klog.KObj(pr), "provisionedAt", prov.LastTransitionTime.Time)
				m.update(pr, now, condition{v1.BookingExpired, metav1.ConditionTrue, CapacityReservationTimeExpiredReason, CapacityReservationTimeExpiredMsg})
				updated++
			}
		case pr.CreationTimestamp.Add(ExpirationTime).Before(now):
			m.update(pr, now, condition{v1.Failed, metav1.ConditionTrue, ExpiredReason, ExpiredMsg})
			updated++
		}
	}
}

// finishedBefore reports whether pr's Provisioned or Failed condition (any
// status) last changed before t.
func finishedBefore(pr *v1.ProvisioningRequest, t time.Time) bool {
	for _, typ := range []string{v1.Provisioned, v1.Failed} {
		if c := apimeta.FindStatusCondition(pr.Status.Conditions, typ); c != nil && c.LastTransitionTime.Time.Before(t) {
			return true
		}
	}
	return false
}

// CheckCapacity answers this iteration's check-capacity requests on the
// simulation as it is: all of a request's pods fit → Provisioned=True and
// they stay placed (the room is booked from now on); else
// Provisioned=False (Failed with noRetry=true). With batch processing it
// stops after --check-capacity-provisioning-request-batch-timebox.
func (m *Manager) CheckCapacity(sim Simulation, now time.Time) {
	start := time.Now()
	for _, d := range m.due {
		if d.pr.Spec.ProvisioningClassName == v1.ProvisioningClassBestEffortAtomicScaleUp {
			continue
		}
		sim.Fork()
		unplaced, err := sim.Place(d.pods)
		switch {
		case err != nil:
			sim.Revert()
			klog.ErrorS(err, "ProvisioningRequest: checking capacity failed", "request", klog.KObj(d.pr))
			m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionFalse, FailedToCheckCapacityReason, FailedToCheckCapacityMsg})
		case len(unplaced) == 0:
			if err := sim.Commit(); err != nil {
				sim.Revert()
				klog.ErrorS(err, "ProvisioningRequest: booking failed", "request", klog.KObj(d.pr))
				continue
			}
			klog.InfoS("ProvisioningRequest: capacity found; booked", "request", klog.KObj(d.pr), "pods", len(d.pods))
			m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionTrue, CapacityIsFoundReason, CapacityIsFoundMsg})
		default:
			sim.Revert()
			klog.InfoS("ProvisioningRequest: capacity not found", "request", klog.KObj(d.pr), "pods", len(d.pods), "notFitting", len(unplaced))
			noRetry, set := d.pr.Spec.Parameters[NoRetryParameter]
			if set && noRetry != "true" && noRetry != "false" {
				klog.ErrorS(nil, "ProvisioningRequest: parameter ignored; supported values are \"true\" and \"false\"",
					"request", klog.KObj(d.pr), "parameter", NoRetryParameter, "value", noRetry)
			}
			if noRetry == "true" {
				m.update(d.pr, now, accepted, condition{v1.Failed, metav1.ConditionTrue, CapacityIsNotFoundReason, CapacityIsNotFoundNoRetryMsg})
			} else {
				m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionFalse, CapacityIsNotFoundReason, CapacityIsNotFoundMsg})
			}
		}
		if m.opts.MaxBatchSize > 1 && time.Since(start) > m.opts.BatchTimebox {
			klog.InfoS("ProvisioningRequests: batch timebox exceeded; the rest wait for the next iteration", "timebox", m.opts.BatchTimebox)
			return
		}
	}
}

// ScaleUpAtomic serves this iteration's best-effort-atomic request: pods
// that fit existing or upcoming nodes need nothing; for the others the
// scale-up asks all the nodes at once or none. Provisioned=True if it fits
// or was asked for, Provisioned=False otherwise. It reports whether the
// cloud was asked for nodes.
func (m *Manager) ScaleUpAtomic(sim Simulation, now time.Time) (bool, error) {
	for _, d := range m.due {
		if d.pr.Spec.ProvisioningClassName != v1.ProvisioningClassBestEffortAtomicScaleUp {
			continue
		}
		return m.scaleUpAtomic(sim, d, now)
	}
	return false, nil
}

func (m *Manager) scaleUpAtomic(sim Simulation, d due, now time.Time) (bool, error) {
	sim.Fork()
	defer sim.Revert()
	unplaced, err := sim.Place(d.pods)
	if err != nil {
		m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionFalse, FailedToCheckCapacityReason, FailedToCheckCapacityMsg})
		return false, fmt.Errorf("ProvisioningRequest %s/%s: %w", d.pr.Namespace, d.pr.Name, err)
	}
	if len(unplaced) == 0 {
		klog.InfoS("ProvisioningRequest: capacity found without a scale-up", "request", klog.KObj(d.pr), "pods", len(d.pods))
		m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionTrue, CapacityIsFoundReason, CapacityIsFoundMsg})
		return false, nil
	}
	scaled, err := sim.ScaleUpAllOrNothing(unplaced)
	if err == nil && scaled {
		klog.InfoS("ProvisioningRequest: capacity asked for, all at once", "request", klog.KObj(d.pr), "pods", len(d.pods), "needingNewNodes", len(unplaced))
		m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionTrue, CapacityIsProvisionedReason, CapacityIsProvisionedMsg})
		return true, nil
	}
	klog.InfoS("ProvisioningRequest: no all-or-nothing scale-up possible; nothing asked for", "request", klog.KObj(d.pr), "pods", len(d.pods), "needingNewNodes", len(unplaced))
	m.update(d.pr, now, accepted, condition{v1.Provisioned, metav1.ConditionFalse, CapacityIsNotFoundReason, CapacityIsNotFoundMsg})
	return false, err
}

// condition is one condition to set.
type condition struct {
	typ     string
	status  metav1.ConditionStatus
	reason  string
	message string
}

var accepted = condition{v1.Accepted, metav1.ConditionTrue, AcceptedReason, AcceptedMsg}

// update sets the conditions on pr, where the rest of the iteration's
// decisions read them, and adds the status to write to the results, the
// last condition being the outcome its event tells. The status is copied
// as decided: a later decision on pr is a write of its own, as it was
// when each decision wrote at once.
func (m *Manager) update(pr *v1.ProvisioningRequest, now time.Time, cs ...condition) {
	t := metav1.NewTime(now)
	for _, c := range cs {
		setCondition(pr, c.typ, c.status, c.reason, c.message, t)
	}
	// Only the conditions change after this: a copy of them is enough.
	written := *pr
	written.Status.Conditions = slices.Clone(pr.Status.Conditions)
	last := cs[len(cs)-1]
	m.results.Updates = append(m.results.Updates, StatusUpdate{Request: &written,
		Outcome: metav1.Condition{Type: last.typ, Status: last.status, Reason: last.reason, Message: last.message}})
}
