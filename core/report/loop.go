package report

import (
	"errors"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// The loop's own records: when an iteration ran and how long its phases
// took, whether the cluster is safe to autoscale, the pending pods and
// removals it saw, the errors it met and the provider's problems.

// kindError is an error labelled with the errors_total type it counts
// under. The loop labels an error where it meets it and the reporter
// counts it once, where the iteration ends (or where it is only logged).
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// CloudProviderError labels err as the cloud provider's.
func CloudProviderError(err error) error { return &kindError{metrics.CloudProviderError, err} }

// InternalError labels err as the autoscaler's own.
func InternalError(err error) error { return &kindError{metrics.InternalError, err} }

// APICallError labels err as a failed Kubernetes API call.
func APICallError(err error) error { return &kindError{metrics.APICallError, err} }

// Error counts err in errors_total, once for each label in its chain
// (none for an unlabelled error).
func (r *Reporter) Error(err error) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if k, ok := e.(*kindError); ok {
			metrics.RegisterError(k.kind)
		}
	}
}

// IterationStarted records an iteration's start for the health check and
// last_activity{main}.
func (r *Reporter) IterationStarted(now time.Time) {
	if r.health != nil {
		r.health.UpdateLastActivity(now)
	}
	metrics.UpdateLastTime(metrics.ActivityMain, now)
}

// IterationEnded records an iteration's duration and either the error it
// returned or its success.
func (r *Reporter) IterationEnded(now time.Time, took time.Duration, err error) {
	metrics.UpdateDuration(metrics.Main, took)
	if err != nil {
		r.Error(err)
		return
	}
	if r.health != nil {
		r.health.UpdateLastSuccessfulRun(now)
	}
	metrics.UpdateLastTime(metrics.ActivityMainSuccessful, now)
}

// Took records how long a step of the loop took since start.
func (r *Reporter) Took(step metrics.FunctionLabel, start time.Time) {
	metrics.UpdateDurationFromStart(step, start)
}

// Safety records whether the cluster is healthy enough to autoscale; a
// safe verdict is autoscaling activity.
func (r *Reporter) Safety(safe bool, now time.Time) {
	metrics.UpdateClusterSafeToAutoscale(safe)
	if safe {
		metrics.UpdateLastTime(metrics.ActivityAutoscaling, now)
	}
}

// NothingToScale records an iteration that found no node group: safe, as
// upstream reports it, though nothing is autoscaled.
func (r *Reporter) NothingToScale() { metrics.UpdateClusterSafeToAutoscale(true) }

// ScaledUp records the time of a scale-up (last_activity{scaleUp}).
func (r *Reporter) ScaledUp(now time.Time) { metrics.UpdateLastTime(metrics.ActivityScaleUp, now) }

// ScaleDownStarted records the time a removal started
// (last_activity{scaleDown}).
func (r *Reporter) ScaleDownStarted(now time.Time) {
	metrics.UpdateLastTime(metrics.ActivityScaleDown, now)
}

// PendingPods records the unschedulable pods an iteration saw and those
// the scheduler has not processed yet.
func (r *Reporter) PendingPods(unschedulable, schedulerUnprocessed int) {
	metrics.UpdateUnschedulablePodsCount(unschedulable, schedulerUnprocessed)
}

// PendingDeletions records the removals still running after scale-down.
func (r *Reporter) PendingDeletions(n int) { metrics.ObservePendingNodeDeletions(n) }

// Problems records what the provider found only the operator can fix
// (cloudprovider.ProblemReporter): the status ConfigMap's message while
// they last, and a warning event on the ConfigMap when one appears. The
// loop alone calls it.
func (r *Reporter) Problems(problems []string) {
	for _, p := range problems {
		if !slices.Contains(r.problems, p) {
			r.events.Event(r.status, apiv1.EventTypeWarning, "CloudProviderProblem", p)
		}
	}
	r.problems = problems
	r.registry.SetMessage(strings.Join(problems, "; "))
}
