package core

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/capacitybuffer"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/provisioningrequest"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// capacityRequests are the capacity APIs the scale-up phase serves, each
// nil when not enabled: ProvisioningRequests (requests, and requestWriter
// that writes what was decided) and CapacityBuffers (buffers,
// bufferWriter), and the pod list processors that turn them into pods
// placed beside the pending ones.
type capacityRequests struct {
	processors    fakepods.Combined
	requests      *provisioningrequest.Manager
	requestWriter *provisioningrequest.Writer
	buffers       *capacitybuffer.Injector
	bufferWriter  *capacitybuffer.StatusWriter
}

// SetProvisioningRequests serves ProvisioningRequests with m: it runs as a
// pod list processor (bookings, consumers, picking requests), and the
// scale-up phase lends it the simulation to answer them; w writes what it
// decided, after the scale-up phase. Call before Run.
func (a *Autoscaler) SetProvisioningRequests(m *provisioningrequest.Manager, w *provisioningrequest.Writer) {
	a.capacity.requests, a.capacity.requestWriter = m, w
	a.AddPodListProcessor(m)
}

// SetCapacityBuffers injects CapacityBuffers' fake pods with in, a pod
// list processor; w writes the Provisioning conditions it decided, after
// the scale-up phase. Call before Run.
func (a *Autoscaler) SetCapacityBuffers(in *capacitybuffer.Injector, w *capacitybuffer.StatusWriter) {
	a.capacity.buffers, a.capacity.bufferWriter = in, w
	a.AddPodListProcessor(in)
}

// writeCapacityStatus has the reporter write what the scale-up phase
// decided about ProvisioningRequests and CapacityBuffers, once its
// decisions are all made. ctx bounds the writes.
func (a *Autoscaler) writeCapacityStatus(ctx context.Context) {
	if a.capacity.requests != nil {
		a.report.ProvisioningRequests(ctx, a.capacity.requests.Results(), a.capacity.requestWriter)
	}
	if a.capacity.buffers != nil {
		a.report.CapacityBuffers(ctx, a.capacity.buffers.Results(), a.capacity.bufferWriter)
	}
}

// requestsDue says which ProvisioningRequest classes have a request to
// answer this iteration.
func (a *Autoscaler) requestsDue() (checkCapacity, atomic bool) {
	if a.capacity.requests == nil {
		return false, false
	}
	return a.capacity.requests.Due()
}

// requestSimulation is the iteration's snapshot and scale-up as a
// provisioningrequest.Simulation.
type requestSimulation struct {
	a            *Autoscaler
	snap         *simulator.ClusterSnapshot
	quotas       resourcequotas.Tracker
	templates    map[string]*framework.NodeInfo
	templateErrs map[string]error
	readyNodes   int
	now          time.Time
}

func (s *requestSimulation) Fork()         { s.snap.Fork() }
func (s *requestSimulation) Commit() error { return s.snap.Commit() }
func (s *requestSimulation) Revert()       { s.snap.Revert() }

func (s *requestSimulation) Place(pods []*apiv1.Pod) ([]*apiv1.Pod, error) {
	_, unplaced, err := simulator.TrySchedulePods(s.a.checker, s.snap, pods)
	return unplaced, err
}

func (s *requestSimulation) ScaleUpAllOrNothing(pods []*apiv1.Pod) (bool, error) {
	if s.templates == nil || (!s.a.opts.ScaleUpFromZero && s.readyNodes == 0) {
		return false, nil
	}
	res, err := s.a.scaleUp.ScaleUp(scaleup.Input{
		Snapshot: s.snap, Pods: pods, Quotas: s.quotas, Templates: s.templates, TemplateErrors: s.templateErrs, Now: s.now, AllOrNothing: true,
	})
	if err != nil {
		return false, err
	}
	return res.ScaledUp(), nil
}
