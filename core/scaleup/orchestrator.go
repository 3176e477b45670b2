package scaleup

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// NotTriggerScaleUpInterval is the least time between two NotTriggerScaleUp
// events of one pod, so a pod pending for hours does not flood the event
// stream (one event per loop would be one every 10 s).
const NotTriggerScaleUpInterval = 10 * time.Minute

// Orchestrator runs scale-ups: computePlan decides (plan.go), the executor
// acts (executor.go).
type Orchestrator struct {
	opts     config.AutoscalingOptions
	registry *clusterstate.Registry
	checker  *simulator.PredicateChecker
	exec     *executor
	// similarity says which groups --balance-similar-node-groups balances.
	similarity Similarity
	// provider describes node groups that do not exist yet and prices
	// them (node autoprovisioning); the executor alone changes the cloud.
	provider cloudprovider.CloudProvider
}

// New returns an orchestrator. Events about groups go to the status
// ConfigMap opts.Namespace/opts.StatusConfigMapName.
func New(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	strategy expander.Strategy, checker *simulator.PredicateChecker, recorder record.EventRecorder) *Orchestrator {
	return &Orchestrator{
		opts: opts, registry: registry, checker: checker, provider: provider,
		exec:       newExecutor(opts, provider, registry, strategy, recorder),
		similarity: NewSimilarity(opts),
	}
}

// StatusConfigMapRef is the object the autoscaler's own events are
// recorded against.
func StatusConfigMapRef(opts config.AutoscalingOptions) *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
}

// Input is what one scale-up looks at.
type Input struct {
	// Snapshot holds the registered nodes (minus those being deleted) and
	// the upcoming template nodes, with pods that fit already placed.
	Snapshot *simulator.ClusterSnapshot
	// Pods are pending pods that fit neither existing nor upcoming nodes.
	Pods []*apiv1.Pod
	// Quotas counts the live registered nodes against the cluster-wide
	// limits; the scale-up adds the nodes still coming up.
	Quotas resourcequotas.Tracker
	// Templates per group id, and why some groups have none.
	Templates      map[string]*framework.NodeInfo
	TemplateErrors map[string]error
	// DaemonSets start pods on new nodes; templates of node groups that do
	// not exist yet are built with them.
	DaemonSets []*appsv1.DaemonSet
	Now        time.Time
	// AllOrNothing (a best-effort-atomic ProvisioningRequest's pods): only
	// an option that places every pod counts, in one group (no balancing),
	// grown with the provider's AtomicIncreaseSize.
	AllOrNothing bool
}

// Result says what a scale-up did.
type Result struct {
	Increases []Increase
	// Helped are the pods the new nodes are for.
	Helped []*apiv1.Pod
	// NoGroup are the pods no group can host now (NotTriggerScaleUp).
	NoGroup []*apiv1.Pod
}

// ScaledUp reports whether any group grew.
func (r *Result) ScaledUp() bool { return len(r.Increases) > 0 }

// ScaleUp plans the scale-up for in.Pods and has the executor grow the best
// option's groups (and, with --balance-similar-node-groups, the groups like
// it).
func (o *Orchestrator) ScaleUp(in Input) (*Result, error) {
	res := &Result{}
	if len(in.Pods) == 0 {
		return res, nil
	}
	start := time.Now()
	defer metrics.UpdateDurationFromStart(metrics.ScaleUp, start)
	return o.exec.run(o.computePlan(in), in), nil
}
