package scaleup

// The planner's options of node groups that do not exist yet (node
// autoprovisioning): what a new pool must carry for the pending pods, and
// the cheapest size that helps them.

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
	"github.com/doks-autoscaler/cluster-autoscaler/expander/price"
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
// pool may carry: keys outside the kubernetes.io and k8s.io namespaces
// (and their subdomains), which nodes get from Kubernetes itself. What a
// cloud reserves besides is the provider's to refuse (NewNodeGroup).
func requiredLabels(p *apiv1.Pod) map[string]string {
	out := map[string]string{}
	for k, v := range p.Spec.NodeSelector {
		if kubernetesLabel(k) {
			continue
		}
		out[k] = v
	}
	return out
}

// kubernetesLabel reports whether key is in a namespace Kubernetes
// reserves for itself: kubernetes.io or k8s.io, or a subdomain of either.
func kubernetesLabel(key string) bool {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, r := range []string{"kubernetes.io", "k8s.io"} {
		if ns == r || strings.HasSuffix(ns, "."+r) {
			return true
		}
	}
	return false
}

// separationTaints are the taints a new pool for the pod may carry, as
// GKE's node auto-provisioning separates workloads: for each label the pod
// requires (requiredLabels), key=value:NoSchedule when the pod also
// tolerates exactly that, with a toleration naming the key, operator Equal
// (or none) and the value, effect NoSchedule or any. A pod tolerates every
// taint derived for it, and nothing is derived from a toleration that does
// not name its key and value (operator Exists, as a DaemonSet's "tolerate
// everything"), nor for keys requiredLabels leaves out (node.kubernetes.io
// and the other Kubernetes namespaces). The provider keeps only
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

// need is what a new pool must carry for some pending pods, and which
// equivalence groups (indexes) they are.
type need struct {
	carried cloudprovider.Carried
	indexes []int
}

// newGroupOptions adds to the plan, with --node-autoprovisioning-enabled,
// options of node groups that do not exist yet: for each size the provider
// offers and each set of labels the pending pods' nodeSelectors ask for, a
// group whose nodes carry them, estimated as the existing groups are, within
// the same cluster-wide limits (quotas). GPU sizes are offered only to pods
// that ask for a GPU. Of these options only the best buy (node price over
// the price of the pods placed, on whole nodes: wholeNodes) is kept, so the
// expander weighs the existing groups against the best new pool that
// helps; or, when the provider lists its sizes in the operator's order
// (MachineTypeOrderer), the first size that helps. The executor creates the
// group if it wins.
func (p *planning) newGroupOptions(quotas *resourcequotas.Tracker, est *estimator.BinpackingEstimator) {
	if !p.opts.NodeAutoprovisioningEnabled || len(p.egs) == 0 {
		return
	}
	if until := p.in.CreationPausedUntil; p.in.Now.Before(until) {
		klog.V(2).InfoS("Scale-up: node pool creation backed off", "until", until.Format(time.RFC3339))
		p.reasonAll(ReasonAutoprovisionBackoff)
		return
	}
	owned := 0
	for _, gs := range p.registry.NodeGroups() {
		if gs.Group.Autoprovisioned() {
			owned++
		}
	}
	if owned >= p.opts.MaxAutoprovisionedNodeGroupCount {
		klog.V(1).InfoS("Scale-up: no node pool is created", "reason", ReasonMaxAutoprovisioned, "autoprovisioned", owned,
			"max", p.opts.MaxAutoprovisionedNodeGroupCount)
		p.reasonAll(ReasonMaxAutoprovisioned)
		return
	}
	sizes, err := p.provider.GetAvailableMachineTypes()
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
		c := cloudprovider.Carried{Labels: l, Taints: separationTaints(eg.Exemplar(), l)}
		k := c.Key()
		if needs[k] == nil {
			needs[k] = &need{carried: c}
		}
		needs[k].indexes = append(needs[k].indexes, i)
	}
	o, ok := p.provider.(cloudprovider.MachineTypeOrderer)
	byPreference := ok && o.MachineTypesByPreference()
	helped := make([]bool, len(p.egs))
	var best *expander.Option
	var bestCost float64
	for _, size := range sizes {
		if byPreference && best != nil {
			break // an earlier size in the operator's order helps
		}
		for _, k := range slices.Sorted(maps.Keys(needs)) {
			f, ok := p.newGroupCandidate(size, needs[k])
			if !ok {
				continue
			}
			if g := p.sameShape(f.tmpl, needs[k].carried); g != "" {
				// Its option may look the better buy only because a new
				// pool's is trimmed by its last node (wholeNodes) and the
				// group's is not; a second pool of one shape buys nothing
				// the group cannot (the chaos run's pools beyond need).
				klog.V(4).InfoS("Scale-up: node autoprovisioning: an existing node group of the shape can grow", "size", size, "nodeGroup", g)
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
			opt, cost, err := p.wholeNodes(f, opt, est)
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
	rule := "best-priced new node pool that helps"
	if byPreference {
		rule = "first size of autoprovisioning.size_preference that helps"
	}
	klog.V(2).InfoS("Scale-up: "+rule, "nodeGroup", id, "nodes", best.NodeCount,
		"pods", len(best.Pods), "nodePriceOverPodPrice", bestCost)
	p.plan.Options = append(p.plan.Options, *best)
	p.plan.Increases[id] = []Increase{{GroupID: id, From: 0, To: best.NodeCount, Max: best.NodeGroup.MaxSize()}}
}

// newGroupCandidate describes a not-yet-existing group of the size with the
// need's labels and taints, and the need's equivalence groups that fit its
// nodes. The template is the provider's, which may leave taints off (those
// the operator does not allow) and add its own (DOKS's GPU taint): only the
// pods the scheduler's filters place on it count, so a taint never makes
// the pool useless to the pods it is created for.
func (p *planning) newGroupCandidate(size string, nd *need) (candidate, bool) {
	indexes := nd.indexes
	g, err := p.provider.NewNodeGroup(size, nd.carried.Labels, nil, nd.carried.Taints, nil)
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: no group of the size", "size", size, "err", err)
		return candidate{}, false
	}
	if off, _, _ := p.registry.BackedOff(g.Id(), p.in.Now); off {
		for _, i := range indexes {
			p.reasons[i][ReasonBackoff]++
		}
		return candidate{}, false
	}
	base, err := g.TemplateNodeInfo()
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: no template of the size", "size", size, "err", err)
		return candidate{}, false
	}
	tmpl, err := simulator.SanitizedTemplateNodeInfo(base, "template-"+g.Id(), p.in.DaemonSets, p.checker)
	if err != nil {
		klog.V(4).InfoS("Scale-up: node autoprovisioning: template of the size", "size", size, "err", err)
		return candidate{}, false
	}
	gpu := hasGPU(tmpl)
	var idx []int
	for _, i := range indexes {
		if !gpu || wantsGPU(p.egs[i].Exemplar()) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return candidate{}, false
	}
	// The scheduler's reasons for a size that does not fit are not worth an
	// event line per size: ReasonNoAllowedSizeFits sums them up.
	fit := p.fitting(tmpl, idx, nil)
	if len(fit) == 0 {
		return candidate{}, false
	}
	return candidate{gs: clusterstate.NodeGroupState{Group: g, Healthy: true}, tmpl: tmpl, fit: fit}, true
}

// wholeNodes prices a new pool's option by its nodes' price over its pods'
// (priceRatio), and buys one node fewer when that is the better buy. A
// pool is bought whole nodes at a time, and the estimate's last node may
// hold only the pods left over: in a burst of mixed pods two large droplets
// held 24 of 26 pods, and pricing a third for the last two made a pool of
// the smallest size look cheaper for the small pods, leaving the large
// ones to pools of their own (1.80× the cheapest cover, issue 43). With
// one node fewer, what is left stays pending, and the next loop plans it
// with this pool's nodes upcoming, where a smaller size may hold it for
// less. All-or-nothing requests keep every pod.
func (p *planning) wholeNodes(f candidate, opt expander.Option, est *estimator.BinpackingEstimator) (expander.Option, float64, error) {
	ratio, err := p.priceRatio(opt, p.in.Now)
	if err != nil || p.in.AllOrNothing || opt.NodeCount < 2 {
		return opt, ratio, err
	}
	n, pods := est.Estimate(f.groups(), f.tmpl, opt.NodeCount-1)
	if n <= 0 || len(pods) == 0 {
		return opt, ratio, nil
	}
	fewer := opt
	fewer.NodeCount, fewer.Pods = n, pods
	fewer.Debug = fmt.Sprintf("%s +%d for %d pods", opt.NodeGroup.Id(), n, len(pods))
	r, err := p.priceRatio(fewer, p.in.Now)
	if err != nil || r >= ratio {
		return opt, ratio, nil
	}
	klog.V(4).InfoS("Scale-up: node autoprovisioning: one node fewer is the better buy", "nodeGroup", opt.NodeGroup.Id(),
		"nodes", n, "pods", len(pods), "leftPending", len(opt.Pods)-len(pods), "ratio", r, "ratioWithTheLastNode", ratio)
	return fewer, r, nil
}

// priceRatio is the option's hourly node price over the price of the pods
// it places, as upstream's price expander weighs options (price.Score):
// the closer to what the pods' requests are worth, the better the buy.
// Unlike a price per pod, it does not favour a size that places many small
// pods over one that places large pods just as tightly.
func (pl *Planner) priceRatio(opt expander.Option, now time.Time) (float64, error) {
	pm, err := pl.provider.Pricing()
	if err != nil {
		return 0, err
	}
	return price.Score(pm, opt, now, now.Add(time.Hour))
}

// sameShape returns the id of an existing group that can grow (growing)
// whose nodes are of tmpl's instance type and carry the carried labels and
// exactly tmpl's scheduling taints; "" if none.
func (p *planning) sameShape(tmpl *framework.NodeInfo, carried cloudprovider.Carried) string {
	n := tmpl.Node()
	size := n.Labels[apiv1.LabelInstanceTypeStable]
	if size == "" {
		return ""
	}
	for _, g := range p.growing {
		e := g.tmpl.Node()
		if e.Labels[apiv1.LabelInstanceTypeStable] != size || !sameTaints(e.Spec.Taints, n.Spec.Taints) {
			continue
		}
		carries := true
		for k, v := range carried.Labels {
			if e.Labels[k] != v {
				carries = false
				break
			}
		}
		if carries {
			return g.gs.Group.Id()
		}
	}
	return ""
}

// sameTaints reports whether a and b hold the same taints, in any order.
func sameTaints(a, b []apiv1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.ContainsFunc(b, func(t apiv1.Taint) bool { return t.MatchTaint(&a[i]) && t.Value == a[i].Value }) {
			return false
		}
	}
	return true
}
