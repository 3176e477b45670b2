package scaleup

import (
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// executeBest grows the groups of the expander's best option. When the
// cloud refuses every group of it, the next best option is tried, without
// the groups that failed. It fills res on success and returns the options
// left untried otherwise.
func (o *Orchestrator) executeBest(set *optionSet, in Input, res *Result) (untried []expander.Option, scaledUp bool) {
	options := set.options
	for len(options) > 0 {
		best := o.strategy.BestOption(options)
		if best == nil {
			break
		}
		if set.cappedByTotal[best.NodeGroup.Id()] {
			o.maxNodesTotalReached()
		}
		plan := o.plan(*best, set.similar[best.NodeGroup.Id()])
		done, failed, accountLimit := o.execute(plan, in.Templates, in.Now)
		if len(done) > 0 {
			res.Increases = done
			res.Helped = best.Pods
			o.triggered(best.Pods, done)
			klog.Infof("Scale-up: %s for %d pending pod(s) (%s); %s", increasesString(done), len(best.Pods), framework.PodNames(best.Pods, 5), choice(*best, options))
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

// choice says, for the log, why the option's group was picked.
func choice(best expander.Option, options []expander.Option) string {
	if len(options) == 1 {
		return "the only node group that could help"
	}
	return fmt.Sprintf("expander chose %s among %s", best.NodeGroup.Id(), expander.GroupIDs(options))
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
func (o *Orchestrator) maxNodesTotalReached() {
	klog.V(1).Infof("Scale-up: max total nodes in cluster reached (--max-nodes-total=%d)", o.opts.MaxNodesTotal)
	o.recorder.Eventf(o.statusRef, apiv1.EventTypeWarning, "MaxNodesTotalReached", "Max total nodes in cluster reached: %v", o.opts.MaxNodesTotal)
}

// plan turns the chosen option into per-group increases: the option's group
// alone, or with --balance-similar-node-groups spread over it and its
// similar groups, filling the smallest first.
func (o *Orchestrator) plan(best expander.Option, similar []clusterstate.NodeGroupState) []Increase {
	bestState, _ := o.registry.NodeGroup(best.NodeGroup.Id())
	members := append([]clusterstate.NodeGroupState{bestState}, similar...)
	if len(members) > 1 {
		ids := make([]string, 0, len(members))
		for _, m := range members {
			ids = append(ids, m.Group.Id())
		}
		klog.V(2).Infof("Scale-up: balancing %d node(s) across similar node groups %s", best.NodeCount, strings.Join(ids, ", "))
	}
	return Balance(members, best.NodeCount)
}

// execute asks the cloud for the increases, group by group: a refused
// increase backs its group off and does not stop the others, unless the
// cloud refused it at an account-wide limit (accountLimit), which stops
// them all.
func (o *Orchestrator) execute(plan []Increase, templates map[string]*framework.NodeInfo, now time.Time) (done []Increase, failed map[string]bool, accountLimit bool) {
	failed = map[string]bool{}
	groups := map[string]cloudprovider.NodeGroup{}
	for _, g := range o.provider.NodeGroups() {
		groups[g.Id()] = g
	}
	for _, inc := range plan {
		g := groups[inc.GroupID]
		if g == nil {
			failed[inc.GroupID] = true
			continue
		}
		err := g.IncreaseSize(inc.To - inc.From)
		if al, ok := cloudprovider.AsAccountLimit(err); ok {
			failed[inc.GroupID] = true
			o.accountLimitReached(inc, al, now)
			return done, failed, true
		}
		if err != nil {
			failed[inc.GroupID] = true
			o.increaseFailed(g, inc, err, now)
			continue
		}
		o.increased(g, inc, templates[inc.GroupID], now)
		done = append(done, inc)
	}
	return done, failed, false
}

// accountLimitReached handles an increase the cloud refused at an
// account-wide limit (DigitalOcean's droplet limit): every group is backed
// off at once, so that the next loops do not ask group after group for what
// the account cannot have; the failure is counted under the limit's code and
// the status ConfigMap gets an event in the cloud's words.
func (o *Orchestrator) accountLimitReached(inc Increase, al *cloudprovider.AccountLimitError, now time.Time) {
	delta := inc.To - inc.From
	klog.Errorf("Scale-up: node group %s %d->%d refused at an account-wide limit: %v", inc.GroupID, inc.From, inc.To, al)
	metrics.RegisterError(metrics.CloudProviderError)
	metrics.RegisterFailedNodeCreations(al.Code, delta)
	until := o.registry.RegisterAccountLimit(al.Code, clusterstate.BackoffInfo{ErrorCode: al.Code, ErrorMessage: al.Message}, now)
	o.recorder.Eventf(o.statusRef, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
		"Scale-up failed for group %s: the cloud refused it at an account-wide limit (%s): %q; scale-up of every node group backed off until %s",
		inc.GroupID, al.Code, al.Message, until.Format(time.RFC3339))
}

// increaseFailed handles a refused increase: it is logged and counted
// here, the group backed off, and the status ConfigMap gets a
// FailedToScaleUpGroup event.
func (o *Orchestrator) increaseFailed(g cloudprovider.NodeGroup, inc Increase, err error, now time.Time) {
	delta := inc.To - inc.From
	klog.Errorf("Scale-up: node group %s %d->%d failed: %v", inc.GroupID, inc.From, inc.To, err)
	metrics.RegisterError(metrics.CloudProviderError)
	metrics.RegisterFailedNodeCreations(metrics.FailedScaleUpCloudProviderError, delta)
	o.registry.RegisterFailedScaleUp(g, metrics.FailedScaleUpCloudProviderError,
		clusterstate.BackoffInfo{ErrorCode: "cloudProviderError", ErrorMessage: err.Error()}, now)
	o.recorder.Eventf(o.statusRef, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
		"Scale-up failed for group %s: %v", inc.GroupID, err)
}

// increased records an increase the cloud accepted: the registry waits
// for its nodes, the metrics count it (with the template's GPU), and the
// status ConfigMap gets a ScaledUpGroup event.
func (o *Orchestrator) increased(g cloudprovider.NodeGroup, inc Increase, tmpl *framework.NodeInfo, now time.Time) {
	delta := inc.To - inc.From
	o.registry.RegisterScaleUp(g, delta, now)
	gpuName, gpuType := "", ""
	if tmpl != nil {
		if gpu := o.provider.GetNodeGpuConfig(tmpl.Node()); gpu != nil {
			gpuName, gpuType = string(gpu.ExtendedResourceName), gpu.Type
		}
	}
	metrics.RegisterScaleUp(delta, gpuName, gpuType)
	o.recorder.Eventf(o.statusRef, apiv1.EventTypeNormal, "ScaledUpGroup",
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
func (o *Orchestrator) triggered(pods []*apiv1.Pod, incs []Increase) {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = inc.String()
	}
	msg := "[" + strings.Join(parts, " ") + "]"
	for _, p := range pods {
		o.recorder.Eventf(p, apiv1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: %s", msg)
	}
}
