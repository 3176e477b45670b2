// Package report is where the loop's decisions become records. Planners
// decide, executors change the cloud and the cluster and return typed
// outcomes (what was asked, what the cloud answered, what changed), and the
// Reporter turns each plan and outcome into the events, metrics, registry
// updates and health an operator reads. Nothing else in core records.
//
// Each capability adds a case: a file here with one method per outcome it
// returns (scaleup.go, scaledown.go, ...), so a new capability is a planner,
// an executor and its reporter cases, with no change to the others.
package report

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// Reporter records outcomes. It holds no decision state: what it writes
// follows from the outcome it is given and the registry it updates.
type Reporter struct {
	provider cloudprovider.CloudProvider
	registry *clusterstate.Registry
	events   record.EventRecorder
	health   *metrics.HealthCheck // nil: no health check served
	// status is the status ConfigMap: events about the autoscaler as a
	// whole are recorded on it, as upstream does.
	status *apiv1.ObjectReference

	// What recording remembers, which decides nothing: when each pod was
	// last told why it did not trigger a scale-up, the node groups whose
	// series were exported (state.go) and the provider's problems last
	// evented (loop.go).
	notTriggeredAt notTriggered
	series         groupSeries
	problems       []string
	// limitsStatus is the status ConfigMap's limits section as last set.
	limitsStatus api.LimitsStatus
}

// Deps are what a Reporter records into.
type Deps struct {
	Provider cloudprovider.CloudProvider
	Registry *clusterstate.Registry
	Events   record.EventRecorder
	Health   *metrics.HealthCheck
	Status   *apiv1.ObjectReference
}

// New returns a Reporter recording into d. Its events about fake pods go
// to the objects they were made for (fakepods.go).
func New(d Deps) *Reporter {
	r := &Reporter{provider: d.Provider, registry: d.Registry, health: d.Health, status: d.Status}
	if d.Events != nil { // nil stays nil: some cases record no event then
		r.events = fakePodEvents{d.Events}
	}
	return r
}
