package scaleup

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/estimator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

// Reasons node autoprovisioning gives in NotTriggerScaleUp events.
const (
	ReasonNoAllowedSizeFits    Reason = "no node pool size allowed for autoprovisioning fits"
	ReasonMaxAutoprovisioned   Reason = "max autoprovisioned node group count reached"
	ReasonAutoprovisionBackoff Reason = "node pool creation in backoff after a failed creation"
	ReasonCreationStopped      Reason = "node pool creation stopped by the cloud provider (see the status ConfigMap)"
)

// wantsGPU reports whether the pod asks for a GPU: by a device plugin's
// resource, or by a DRA claim.
func wantsGPU(p *apiv1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	_, ok := gpu.In(framework.PodRequests(p))
	return ok
}

// hasGPU reports whether a template offers a GPU: a device plugin's
// resource, or devices a DRA driver publishes (the only devices DOKS nodes
// have are GPUs).
func hasGPU(ni *framework.NodeInfo) bool {
	if _, ok := gpu.In(ni.Node().Status.Allocatable); ok {
		return true
	}
	for _, sl := range ni.ResourceSlices() {
		if len(sl.Spec.Devices) > 0 {
			return true
		}
	}
	return false
}

// requiredLabels are the labels a pod's nodeSelector asks for that a new
// pool can carry: keys outside the kubernetes.io, k8s.io and DigitalOcean
// namespaces, which nodes get from Kubernetes and DOKS, not from a pool.
func requiredLabels(p *apiv1.Pod) map[string]string {
	out := map[string]string{}
	for k, v := range p.Spec.NodeSelector {
		if strings.Contains(k, "kubernetes.io/") || strings.Contains(k, "k8s.io/") || strings.Contains(k, "digitalocean.com/") {
			continue
		}
		out[k] = v
	}
	return out
}

// separationTaints are the taints a new pool for the pod may carry, as
// GKE's node auto-provisioning separates workloads: for each label the pod
// requires (requiredLabels), key=value:NoSchedule when the pod also
// tolerates exactly that, with a toleration naming the key, operator Equal
// (or none) and the value, effect NoSchedule or any. A pod tolerates every
// taint derived for it, and nothing is derived from a toleration that does
// not name its key and value (operator Exists, as a DaemonSet's "tolerate
// everything"), nor for keys requiredLabels leaves out (node.kubernetes.io
// and the other Kubernetes and DOKS namespaces). The provider keeps only
// those whose keys the operator allows.
func separationTaints(p *apiv1.Pod, labels map[string]string) []apiv1.Taint {
	var out []apiv1.Taint
	for _, t := range p.Spec.Tolerations {
		value, selected := labels[t.Key]
		if t.Key == "" || !selected || t.Value != value ||
			(t.Operator != "" && t.Operator != apiv1.TolerationOpEqual) ||
			(t.Effect != "" && t.Effect != apiv1.TaintEffectNoSchedule) {
			continue
		}
		taint := apiv1.Taint{Key: t.Key, Value: value, Effect: apiv1.TaintEffectNoSchedule}
		if !slices.ContainsFunc(out, func(x apiv1.Taint) bool { return x.MatchTaint(&taint) }) {
			out = append(out, taint)
		}
	}
	slices.SortFunc(out, func(a, b apiv1.Taint) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// needKey names what a new pool must carry for a pod: its labels and taints.
func needKey(l map[string]string, taints []apiv1.Taint) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(&b, "%s=%s,", k, l[k])
	}
	for _, t := range taints {
		fmt.Fprintf(&b, "|%s", t.ToString())
	}
	return b.String()
}

// need is what a new pool must carry for some pending pods, and which
// equivalence groups (indexes) they are.
type need struct {
	labels  map[string]string
	taints  []apiv1.Taint
	indexes []int
}

// newGroupOptions adds to the plan, with --node-autoprovisioning-enabled,
// options of node groups that do not exist yet: for each size the provider
// offers and each set of labels the pending pods' nodeSelectors ask for, a
// group whose nodes carry them, estimated as the existing groups are, within
// the same cluster-wide limits (quotas). GPU sizes are offered only to pods
// that ask for a GPU. Of these options only the cheapest (node price per pod
// placed) is kept, so the expander weighs the existing groups against the
// cheapest new pool that helps. The executor creates the group if it wins.
func (p *planner) newGroupOptions(quotas *resourcequotas.Tracker, est *estimator.BinpackingEstimator) {
	o := p.o
	if !o.opts.NodeAutoprovisioningEnabled || len(p.egs) == 0 {
		return
	}
	if until := o.exec.creationPausedUntil(); p.in.Now.Before(until) {
		klog.V(2).InfoS("Scale-up: node pool creation backed off", "until", until.Format(time.RFC3339))
		p.reasonAll(ReasonAutoprovisionBackoff)
		return
	}
	owned := 0
	for _, gs := range o.registry.NodeGroups() {
		if gs.Group.Autoprovisioned() {
			owned++
		}
	}
	if owned >= o.opts.MaxAutoprovisionedNodeGroupCount {
		klog.V(1).InfoS("Scale-up: no node pool is created", "reason", ReasonMaxAutoprovisioned, "autoprovisioned", owned,
			"max", o.opts.MaxAutoprovisionedNodeGroupCount)
		p.reasonAll(ReasonMaxAutoprovisioned)
		return
	}
	sizes, err := o.provider.GetAvailableMachineTypes()
	if errors.Is(err, cloudprovider.ErrCreationStopped) {
		// The provider reports why among its problems (log, status
		// ConfigMap, event) when it starts; this loop only says so.
		klog.V(2).InfoS("Scale-up: no node pool is created", "reason", err)
		p.reasonAll(ReasonCreationStopped)
		return
	}
	if err != nil {
		klog.ErrorS(err, "Scale-up: node autoprovisioning: the sizes pools may be created with are unknown")
		return
	}
	// The pending pods by the labels and taints their nodes must carry.
	needs := map[string]*need{}
	for i, eg := range p.egs {
		l := requiredLabels(eg.Exemplar())
		t := separationTaints(eg.Exemplar(), l)
		k := needKey(l, t)
		if needs[k] == nil {
			needs[k] = &need{labels: l, taints: t}
		}
		needs[k].indexes = append(needs[k].indexes, i)
	}
	helped := make([]bool, len(p.egs))
	var best *expander.Option
	var bestCost float64
	for _, size := range sizes {
		for _, k := range slices.Sorted(maps.Keys(needs)) {
			f, ok := p.newGroupFit(size, needs[k])
			if !ok {
				continue
			}
			for _, fg := range f.fit {
				helped[fg.index] = true
			}
			opt, ok := p.optionFor(f, quotas, est, nil)
			if !ok {
				continue
			}
			if p.in.AllOrNothing && len(opt.Pods) < len(p.in.Pods) {
				// A pool is created with all its nodes in one request,
				// which is all-or-nothing; but it must hold every pod.
				for _, fg := range f.fit {
					p.reasons[fg.index][ReasonNotAll]++
				}
				continue
			}
			cost, err := o.costPerPod(opt, p.in.Now)
			if err != nil {
				klog.V(2).InfoS("Scale-up: node autoprovisioning: no price", "nodeGroup", opt.NodeGroup.Id(), "err", err)
				continue
			}
			if best == nil || cost < bestCost {
				best, bestCost = &opt, cost
			}
		}
	}
	for i, h := range helped {
		if !h {
			p.reasons[i][ReasonNoAllowedSizeFits]++
		}
	}
	if best == nil {
		return
	}
	id := best.NodeGroup.Id()
	klog.V(2).InfoS("Scale-up: cheapest new node pool that helps", "nodeGroup", id, "nodes", best.NodeCount,
		"pods", len(best.Pods), "hourlyPricePerPod", bestCost)
	p.plan.Options = append(p.plan.Options, *best)
	p.plan.Increases[id] = []Increase{{GroupID: id, From: 0, To: best.NodeCount, Max: best.NodeGroup.MaxSize()}}
}

// newGroupFit describes a not-yet-existing group of the size with the
// need's labels and taints, and the need's equivalence groups that fit its
// nodes. The template is the provider's, which may leave taints off (those
// the operator does not allow) and add its own (DOKS's GPU taint): only the
// pods the scheduler's filters place on it count, so a taint never makes
// the pool useless to the pods it is created for.
func (p *planner) newGroupFit(size string, nd *need) (groupFit, bool) {
	o := p.o
	indexes := nd.indexes
	g, err := o.provider.NewNodeGroup(size, nd.labels, nil, nd.taints, nil)
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: no group of the size", "size", size, "err", err)
		return groupFit{}, false
	}
	if off, _, _ := o.registry.BackedOff(g.Id(), p.in.Now); off {
		for _, i := range indexes {
			p.reasons[i][ReasonBackoff]++
		}
		return groupFit{}, false
	}
	base, err := g.TemplateNodeInfo()
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: no template of the size", "size", size, "err", err)
		return groupFit{}, false
	}
	tmpl, err := simulator.SanitizedTemplateNodeInfo(base, "template-"+g.Id(), p.in.DaemonSets, o.checker)
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: template of the size", "size", size, "err", err)
		return groupFit{}, false
	}
	gpu := hasGPU(tmpl)
	var idx []int
	for _, i := range indexes {
		if !gpu || wantsGPU(p.egs[i].Exemplar()) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return groupFit{}, false
	}
	// The scheduler's reasons for a size that does not fit are not worth an
	// event line per size: ReasonNoAllowedSizeFits sums them up.
	fit := p.fitting(tmpl, idx, nil)
	if len(fit) == 0 {
		return groupFit{}, false
	}
	return groupFit{gs: clusterstate.NodeGroupState{Group: g, Healthy: true}, tmpl: tmpl, fit: fit}, true
}

// costPerPod is the option's hourly node price per pod it places.
func (o *Orchestrator) costPerPod(opt expander.Option, now time.Time) (float64, error) {
	pm, err := o.provider.Pricing()
	if err != nil {
		return 0, err
	}
	price, err := pm.NodePrice(opt.NodeInfo.Node(), now, now.Add(time.Hour))
	if err != nil {
		return 0, err
	}
	return price * float64(opt.NodeCount) / float64(len(opt.Pods)), nil
}

// creationPausedUntil is when node pool creation may be tried again after
// a refused one.
func (e *executor) creationPausedUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.creationBlockedUntil
}

func (e *executor) pauseCreation(now time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.creationBlockedUntil = now.Add(e.opts.InitialNodeGroupBackoffDuration)
	return e.creationBlockedUntil
}

// create makes the chosen not-yet-existing group with the nodes its option
// needs and records it as a scale-up of the new group. A refused creation
// backs the option off, and node pool creation as a whole for the initial
// backoff: DigitalOcean's refusals (a pool limit, the token's scope) hold
// for any size, and trying each size in turn would be a storm of refused
// requests. At an account-wide limit (the droplet limit) every group is
// backed off, as for a refused increase.
func (e *executor) create(best expander.Option, in Input, res *Result) (ok bool, accountLimit bool) {
	g := best.NodeGroup
	var made cloudprovider.NodeGroup
	var err error
	if sc, isSized := g.(cloudprovider.SizedCreator); isSized {
		made, err = sc.CreateWithSize(best.NodeCount)
	} else if made, err = g.Create(); err == nil {
		// Create makes the group at the provider's own initial size.
		if target, terr := made.TargetSize(); terr != nil {
			err = terr
		} else if best.NodeCount > target {
			err = made.IncreaseSize(best.NodeCount - target)
		}
	}
	if al, isLimit := cloudprovider.AsAccountLimit(err); isLimit {
		until := e.pauseCreation(in.Now)
		e.accountLimitReached(Increase{GroupID: g.Id(), To: best.NodeCount}, best.NodeInfo, al, in.Now)
		e.recorder.Eventf(e.statusRef, apiv1.EventTypeWarning, "FailedToCreateNodeGroup",
			"Creating node group %s failed at an account-wide limit (%s): %q; node pool creation backed off until %s",
			g.Id(), al.Code, al.Message, until.Format(time.RFC3339))
		return false, true
	}
	if err != nil {
		metrics.RegisterError(metrics.CloudProviderError)
		metrics.RegisterFailedNodeCreations(metrics.FailedScaleUpCloudProviderError, best.NodeCount)
		gpuName, gpuType, draDrivers := MetricLabels(e.provider, best.NodeInfo)
		metrics.RegisterFailedScaleUp(metrics.FailedScaleUpCloudProviderError, gpuName, gpuType, draDrivers)
		e.registry.RegisterFailedScaleUp(g, metrics.FailedScaleUpCloudProviderError,
			clusterstate.BackoffInfo{ErrorCode: "cloudProviderError", ErrorMessage: err.Error()}, in.Now)
		klog.ErrorS(err, "Scale-up: creating a node group failed", "nodeGroup", g.Id(), "nodes", best.NodeCount)
		until := e.pauseCreation(in.Now)
		e.recorder.Eventf(e.statusRef, apiv1.EventTypeWarning, "FailedToCreateNodeGroup",
			"Creating node group %s failed (node pool creation backed off until %s): %v", g.Id(), until.Format(time.RFC3339), err)
		return false, false
	}
	metrics.RegisterNodeGroupCreation()
	inc := Increase{GroupID: made.Id(), From: 0, To: best.NodeCount, Max: made.MaxSize()}
	e.increased(made, inc, best.NodeInfo, in.Now)
	e.recorder.Eventf(e.statusRef, apiv1.EventTypeNormal, "CreatedNodeGroup",
		"Created node group %s (%s) with %d node(s) for %d pending pod(s)", made.Id(), g.Id(), best.NodeCount, len(best.Pods))
	res.Increases = []Increase{inc}
	res.Helped = best.Pods
	e.triggered(best.Pods, res.Increases)
	klog.InfoS("Scale-up: created a node group", "nodeGroup", made.Id(), "as", g.Id(), "nodes", best.NodeCount,
		"pods", len(best.Pods), "names", framework.PodNames(best.Pods, 5))
	return true, false
}

// existingOnly drops the options of groups that do not exist yet.
func existingOnly(options []expander.Option) []expander.Option {
	return slices.DeleteFunc(slices.Clone(options), func(o expander.Option) bool { return !o.NodeGroup.Exist() })
}
