package scaleup

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/statemetrics"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// executor carries out scale-up plans: it asks the expander for the best
// option, calls the provider, tells the registry, and records the events
// and metrics of what it did and of what the plan skipped.
type executor struct {
	opts      config.AutoscalingOptions
	provider  cloudprovider.CloudProvider
	registry  *clusterstate.Registry
	strategy  expander.Strategy
	recorder  record.EventRecorder
	statusRef *apiv1.ObjectReference

	mu            sync.Mutex
	lastNotHelped map[types.UID]time.Time
	// creationBlockedUntil: node pool creation is backed off until then
	// after a refused creation (see create).
	creationBlockedUntil time.Time
}

func newExecutor(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	strategy expander.Strategy, recorder record.EventRecorder) *executor {
	return &executor{opts: opts, provider: provider, registry: registry, strategy: strategy, recorder: recorder,
		statusRef: StatusConfigMapRef(opts), lastNotHelped: map[types.UID]time.Time{}}
}

// run records what the plan skipped, grows the best option's groups and,
// when nothing grew, says why.
func (e *executor) run(plan *Plan, in Input) *Result {
	res := &Result{}
	for _, d := range plan.EstimateTimes {
		metrics.UpdateDuration(metrics.Estimate, d)
	}
	for _, limit := range plan.LimitsHit {
		metrics.RegisterSkippedScaleUp(skippedLabel(limit))
	}
	for _, nh := range plan.NotHelped {
		res.NoGroup = append(res.NoGroup, nh.Pods...)
		e.notHelped(nh.Pods, nh.Reasons, in.Now)
	}
	untried, scaledUp := e.executeBest(plan, in, res)
	if scaledUp {
		return res
	}
	if len(untried) == 0 && anyTrue(plan.CappedByMaxNodes) {
		e.maxNodesTotalReached()
	}
	if len(plan.NotHelped) > 0 {
		klog.InfoS("Scale-up: pending pods fit no node group", "pods", len(res.NoGroup),
			"names", framework.PodNames(res.NoGroup, 5), "reasons", reasonSummary(plan.NotHelped[0].Reasons))
	} else {
		klog.V(2).InfoS("Scale-up: no scale-up possible", "pendingPods", len(in.Pods))
	}
	return res
}

// skippedLabel is the skipped_scale_events_count reason of a limit.
func skippedLabel(r resourcequotas.Resource) string {
	switch r {
	case resourcequotas.Nodes:
		return metrics.SkippedMaxNodesTotalReached
	case resourcequotas.CPU:
		return metrics.SkippedCPUResourceLimit
	}
	return metrics.SkippedMemoryResourceLimit
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

// executeBest grows the groups of the expander's best option. When the
// cloud refuses every group of it, the next best option is tried, without
// the groups that failed. It fills res on success and returns the options
// left untried otherwise.
func (e *executor) executeBest(plan *Plan, in Input, res *Result) (untried []expander.Option, scaledUp bool) {
	options := plan.Options
	for len(options) > 0 {
		best := e.strategy.BestOption(options)
		if best == nil {
			break
		}
		id := best.NodeGroup.Id()
		if plan.CappedByMaxNodes[id] {
			e.maxNodesTotalReached()
		}
		if !best.NodeGroup.Exist() {
			created, accountLimit := e.create(*best, in, res)
			if created {
				return nil, true
			}
			options = existingOnly(options)
			if accountLimit {
				break
			}
			continue
		}
		incs := plan.Increases[id]
		if len(incs) > 1 {
			klog.V(2).InfoS("Scale-up: balancing across similar node groups", "nodes", best.NodeCount, "nodeGroups", increaseGroups(incs))
		}
		done, failed, accountLimit := e.execute(incs, in.Templates, in.Now, plan.AllOrNothing)
		if len(done) > 0 {
			res.Increases = done
			res.Helped = best.Pods
			e.triggered(best.Pods, done)
			klog.InfoS("Scale-up: growing node groups", "increases", increasesString(done), "pods", len(best.Pods),
				"names", framework.PodNames(best.Pods, 5), "why", choice(*best, options))
			return nil, true
		}
		options = withoutFailed(options, failed)
		if accountLimit {
			// Every other group would get the same answer.
			break
		}
	}
	return options, false
}

// increaseGroups lists the increases' group IDs.
func increaseGroups(incs []Increase) string {
	ids := make([]string, len(incs))
	for i, inc := range incs {
		ids[i] = inc.GroupID
	}
	return strings.Join(ids, ", ")
}

// choice says, for the log, why the option's group was picked.
func choice(best expander.Option, options []expander.Option) string {
	if len(options) == 1 {
		return "the only node group that could help"
	}
	const listed = 5 // at 100 pools a full list made each scale-up line 4 KB
	among := expander.GroupIDs(options[:min(len(options), listed)])
	if len(options) > listed {
		among += fmt.Sprintf(" and %d more", len(options)-listed)
	}
	return fmt.Sprintf("expander chose %s among %d options: %s", best.NodeGroup.Id(), len(options), among)
}

// withoutFailed drops the options of groups whose increase the cloud
// refused: they are backed off now and would fail again.
func withoutFailed(options []expander.Option, failed map[string]bool) []expander.Option {
	var rest []expander.Option
	for _, opt := range options {
		if !failed[opt.NodeGroup.Id()] {
			rest = append(rest, opt)
		}
	}
	return rest
}

// maxNodesTotalReached records upstream's MaxNodesTotalReached event on the
// status ConfigMap: --max-nodes-total bounds a scale-up the pending pods need.
func (e *executor) maxNodesTotalReached() {
	klog.V(1).InfoS("Scale-up: max total nodes in cluster reached", "maxNodesTotal", e.opts.MaxNodesTotal)
	e.recorder.Eventf(e.statusRef, apiv1.EventTypeWarning, "MaxNodesTotalReached", "Max total nodes in cluster reached: %v", e.opts.MaxNodesTotal)
}

// execute asks the cloud for the increases, group by group (atomic: each
// through AtomicIncreaseSize, all of its nodes or none): a refused
// increase backs its group off and does not stop the others, unless the
// cloud refused it at an account-wide limit (accountLimit), which stops
// them all.
func (e *executor) execute(plan []Increase, templates map[string]*framework.NodeInfo, now time.Time, atomic bool) (done []Increase, failed map[string]bool, accountLimit bool) {
	failed = map[string]bool{}
	groups := map[string]cloudprovider.NodeGroup{}
	for _, g := range e.provider.NodeGroups() {
		groups[g.Id()] = g
	}
	for _, inc := range plan {
		g := groups[inc.GroupID]
		if g == nil {
			failed[inc.GroupID] = true
			continue
		}
		increase := g.IncreaseSize
		if atomic {
			increase = g.AtomicIncreaseSize
		}
		err := increase(inc.To - inc.From)
		if al, ok := cloudprovider.AsAccountLimit(err); ok {
			failed[inc.GroupID] = true
			e.accountLimitReached(inc, templates[inc.GroupID], al, now)
			return done, failed, true
		}
		if err != nil {
			failed[inc.GroupID] = true
			e.increaseFailed(g, inc, templates[inc.GroupID], err, now)
			continue
		}
		e.increased(g, inc, templates[inc.GroupID], now)
		done = append(done, inc)
	}
	return done, failed, false
}

// accountLimitReached handles an increase the cloud refused at an
// account-wide limit (DigitalOcean's droplet limit): every group is backed
// off at once, so that the next loops do not ask group after group for what
// the account cannot have; the failure is counted under the limit's code and
// the status ConfigMap gets an event in the cloud's words.
func (e *executor) accountLimitReached(inc Increase, tmpl *framework.NodeInfo, al *cloudprovider.AccountLimitError, now time.Time) {
	delta := inc.To - inc.From
	klog.ErrorS(al, "Scale-up: refused at an account-wide limit", "nodeGroup", inc.GroupID, "from", inc.From, "to", inc.To)
	metrics.RegisterError(metrics.CloudProviderError)
	metrics.RegisterFailedNodeCreations(al.Code, delta)
	gpuName, gpuType, draDrivers := MetricLabels(e.provider, tmpl)
	metrics.RegisterFailedScaleUp(al.Code, gpuName, gpuType, draDrivers)
	until := e.registry.RegisterAccountLimit(al.Code, clusterstate.BackoffInfo{ErrorCode: al.Code, ErrorMessage: al.Message}, now)
	statemetrics.ReportHealth(e.registry, now)
	e.recorder.Eventf(e.statusRef, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
		"Scale-up failed for group %s: the cloud refused it at an account-wide limit (%s): %q; scale-up of every node group backed off until %s",
		inc.GroupID, al.Code, al.Message, until.Format(time.RFC3339))
}

// increaseFailed handles a refused increase: it is logged and counted
// here, the group backed off, and the status ConfigMap gets a
// FailedToScaleUpGroup event.
func (e *executor) increaseFailed(g cloudprovider.NodeGroup, inc Increase, tmpl *framework.NodeInfo, err error, now time.Time) {
	delta := inc.To - inc.From
	klog.ErrorS(err, "Scale-up: increase failed", "nodeGroup", inc.GroupID, "from", inc.From, "to", inc.To)
	metrics.RegisterError(metrics.CloudProviderError)
	metrics.RegisterFailedNodeCreations(metrics.FailedScaleUpCloudProviderError, delta)
	gpuName, gpuType, draDrivers := MetricLabels(e.provider, tmpl)
	metrics.RegisterFailedScaleUp(metrics.FailedScaleUpCloudProviderError, gpuName, gpuType, draDrivers)
	e.registry.RegisterFailedScaleUp(g, metrics.FailedScaleUpCloudProviderError,
		clusterstate.BackoffInfo{ErrorCode: "cloudProviderError", ErrorMessage: err.Error()}, now)
	statemetrics.ReportHealth(e.registry, now)
	e.recorder.Eventf(e.statusRef, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
		"Scale-up failed for group %s: %v", inc.GroupID, err)
}

// MetricLabels returns the gpu_resource_name, gpu_name and dra_drivers
// labels of the scale-up metrics for a node group with this template: its
// GPU and the drivers of its ResourceSlices; empty without a template.
func MetricLabels(p cloudprovider.CloudProvider, tmpl *framework.NodeInfo) (gpuName, gpuType, draDrivers string) {
	if tmpl == nil {
		return "", "", ""
	}
	gpuName, gpuType = cloudprovider.GPULabels(p, tmpl.Node())
	return gpuName, gpuType, dra.DriversLabel(tmpl.ResourceSlices())
}

// increased records an increase the cloud accepted: the registry waits
// for its nodes, the metrics count it (with the template's GPU and DRA drivers), and the
// status ConfigMap gets a ScaledUpGroup event.
func (e *executor) increased(g cloudprovider.NodeGroup, inc Increase, tmpl *framework.NodeInfo, now time.Time) {
	delta := inc.To - inc.From
	e.registry.RegisterScaleUp(g, delta, now)
	gpuName, gpuType, draDrivers := MetricLabels(e.provider, tmpl)
	metrics.RegisterScaleUp(delta, gpuName, gpuType, draDrivers)
	e.recorder.Eventf(e.statusRef, apiv1.EventTypeNormal, "ScaledUpGroup",
		"Scale-up: setting group %s size to %d instead of %d (max: %d)", inc.GroupID, inc.To, inc.From, inc.Max)
}

// increasesString renders the increases for the scale-up log line.
func increasesString(incs []Increase) string {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = fmt.Sprintf("node group %s %d->%d (max: %d)", inc.GroupID, inc.From, inc.To, inc.Max)
	}
	return strings.Join(parts, ", ")
}

// triggered gives each helped pod a TriggeredScaleUp event naming the
// increases made for it.
func (e *executor) triggered(pods []*apiv1.Pod, incs []Increase) {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = inc.String()
	}
	msg := "[" + strings.Join(parts, " ") + "]"
	for _, p := range pods {
		e.recorder.Eventf(p, apiv1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: %s", msg)
	}
}

// notHelped emits NotTriggerScaleUp, at most once per pod per
// NotTriggerScaleUpInterval.
func (e *executor) notHelped(pods []*apiv1.Pod, reasons map[Reason]int, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	msg := "pod didn't trigger scale-up: " + reasonSummary(reasons)
	for uid, t := range e.lastNotHelped {
		if now.Sub(t) >= NotTriggerScaleUpInterval {
			delete(e.lastNotHelped, uid)
		}
	}
	for _, p := range pods {
		if _, recent := e.lastNotHelped[p.UID]; recent {
			continue
		}
		e.lastNotHelped[p.UID] = now
		e.recorder.Event(p, apiv1.EventTypeNormal, "NotTriggerScaleUp", msg)
	}
}
