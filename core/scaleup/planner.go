package scaleup

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/estimator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Planner decides scale-ups: for pending pods, the options that would
// help, the increases each would make, and why the other node groups would
// not help. It reads the registry, the snapshot (forking and reverting it)
// and the provider's descriptions and prices of node groups that do not
// exist yet; it changes nothing and records nothing.
type Planner struct {
	opts     config.AutoscalingOptions
	registry *clusterstate.Registry
	// provider describes and prices node groups that do not exist yet
	// (node autoprovisioning); only the executor changes the cloud.
	provider cloudprovider.CloudProvider
	checker  *simulator.PredicateChecker
	// similarity says which groups --balance-similar-node-groups balances.
	similarity Similarity
}

// NewPlanner returns a Planner.
func NewPlanner(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	checker *simulator.PredicateChecker) *Planner {
	return &Planner{opts: opts, registry: registry, provider: provider, checker: checker, similarity: NewSimilarity(opts)}
}

// planInput is what one plan looks at: the scale-up's Input, and until
// when node pool creation is paused after a refused one (the executor's
// answer, passed in by the orchestrator).
type planInput struct {
	Input
	CreationPausedUntil time.Time
}

// planning is one computation of a Plan by the Planner.
type planning struct {
	*Planner
	in  planInput
	egs []simulator.PodEquivalenceGroup
	// reasons, per equivalence group: why node groups would not help its
	// pods, with how many groups gave each reason.
	reasons []map[Reason]int
	plan    *Plan
	limits  map[resourcequotas.Resource]bool
	// growing are the existing groups with an option not capped by their
	// max size: no new pool of one's shape is offered beside it.
	growing []candidate
}

// reasonAll records a reason that applies to the pods of every
// equivalence group.
func (p *planning) reasonAll(reason Reason) {
	for i := range p.reasons {
		p.reasons[i][reason]++
	}
}

// computePlan asks, for each group that may grow now, how many nodes like
// its template the pending pods need within its room, and records, per
// equivalence group, why the others would not help.
func (pl *Planner) computePlan(in planInput) *Plan {
	p := &planning{Planner: pl, in: in, egs: simulator.GroupPods(in.Pods),
		plan:   &Plan{Increases: map[string][]Increase{}, CappedByMaxNodes: map[string]bool{}, AllOrNothing: in.AllOrNothing},
		limits: map[resourcequotas.Resource]bool{}}
	p.reasons = make([]map[Reason]int, len(p.egs))
	for i := range p.reasons {
		p.reasons[i] = map[Reason]int{}
	}
	groups := p.registry.NodeGroups()
	quotas := in.Quotas.WithUpcoming(groups, templateNode(in.Templates))
	fits := p.candidates(groups)
	var similar map[string][]clusterstate.NodeGroupState
	if !in.AllOrNothing {
		// An all-or-nothing increase is one call to one group.
		similar = p.similarGroups(fits)
	}
	est := estimator.NewBinpackingEstimator(p.checker, in.Snapshot)
	for _, f := range fits {
		opt, ok := p.optionFor(f, &quotas, est, similar[f.gs.Group.Id()])
		if ok && in.AllOrNothing && len(opt.Pods) < len(in.Pods) {
			klog.V(2).InfoS("Scale-up: all-or-nothing: node group cannot host every pod within its limits", "nodeGroup", f.gs.Group.Id(),
				"pods", len(in.Pods), "fitting", len(opt.Pods))
			for i := range f.fit {
				p.reasons[f.fit[i].index][ReasonNotAll]++
			}
			continue
		}
		if ok {
			p.plan.Options = append(p.plan.Options, opt)
			p.plan.Increases[f.gs.Group.Id()] = p.increasesFor(opt, f.gs, similar[f.gs.Group.Id()])
			if !p.plan.CappedByMaxNodes[f.gs.Group.Id()] {
				p.growing = append(p.growing, f)
			}
		}
	}
	p.newGroupOptions(&quotas, est)
	for _, i := range uncoveredGroups(p.egs, p.plan.Options) {
		p.plan.NotHelped = append(p.plan.NotHelped, NotHelped{Pods: p.egs[i].Pods, Reasons: p.reasons[i]})
	}
	return p.plan
}

// candidates returns the groups that may grow now (skipReason) and whose
// template fits some pending pods.
func (p *planning) candidates(groups []clusterstate.NodeGroupState) []candidate {
	var out []candidate
	for _, gs := range groups {
		id := gs.Group.Id()
		if !gs.Group.Exist() {
			// Deleted since the registry listed it: a pool node
			// autoprovisioning created, deleted with its last nodes by a
			// removal that ended during this loop. It is no option, and
			// no reason for the pods either.
			klog.V(4).InfoS("Scale-up: skipping a node group deleted since it was listed", "nodeGroup", id)
			continue
		}
		if reason := p.skipReason(gs, p.in.Input); reason != "" {
			klog.V(4).InfoS("Scale-up: skipping node group", "nodeGroup", id, "reason", reason)
			p.reasonAll(reason)
			continue
		}
		tmpl := p.in.Templates[id]
		if fit := p.fitsOn(tmpl); len(fit) > 0 {
			out = append(out, candidate{gs: gs, tmpl: tmpl, fit: fit})
		}
	}
	return out
}

// optionFor estimates the nodes a group needs for the pods that fit it,
// within its room; with no room it records the limit that stops it.
func (p *planning) optionFor(f candidate, quotas *resourcequotas.Tracker, est *estimator.BinpackingEstimator, similar []clusterstate.NodeGroupState) (expander.Option, bool) {
	gs, tmpl, id := f.gs, f.tmpl, f.gs.Group.Id()
	room, reason, limit := p.room(gs, tmpl, quotas, similar)
	if room <= 0 {
		p.plan.CappedByMaxNodes[id] = quotas.BoundByMaxNodes(room, 0)
		klog.V(2).InfoS("Scale-up: node group could host pending pods but has no room", "nodeGroup", id, "reason", reason)
		for i := range f.fit {
			p.reasons[f.fit[i].index][reason]++
		}
		if limit != "" && !p.limits[limit] {
			p.limits[limit] = true
			p.plan.LimitsHit = append(p.plan.LimitsHit, limit)
		}
		return expander.Option{}, false
	}
	estStart := time.Now()
	n, pods := est.Estimate(f.groups(), tmpl, room)
	p.plan.EstimateTimes = append(p.plan.EstimateTimes, time.Since(estStart))
	if n <= 0 || len(pods) == 0 {
		return expander.Option{}, false
	}
	p.plan.CappedByMaxNodes[id] = quotas.BoundByMaxNodes(room, n)
	klog.V(4).InfoS("Scale-up: option", "nodeGroup", id, "nodes", n, "pods", len(pods))
	return expander.Option{NodeGroup: gs.Group, NodeCount: n, Pods: pods, NodeInfo: tmpl,
		Debug: fmt.Sprintf("%s +%d for %d pods", id, n, len(pods))}, true
}

// increasesFor turns an option into per-group increases: the option's
// group alone, or with --balance-similar-node-groups spread over it and
// its similar groups, filling the smallest first.
func (pl *Planner) increasesFor(opt expander.Option, gs clusterstate.NodeGroupState, similar []clusterstate.NodeGroupState) []Increase {
	return Balance(append([]clusterstate.NodeGroupState{gs}, similar...), opt.NodeCount)
}

// uncoveredGroups returns the indexes of the equivalence groups none of
// whose pods an option would place: no group helps them.
func uncoveredGroups(egs []simulator.PodEquivalenceGroup, options []expander.Option) []int {
	covered := map[types.UID]bool{}
	for _, opt := range options {
		for _, p := range opt.Pods {
			covered[p.UID] = true
		}
	}
	var out []int
	for i, eg := range egs {
		helpedAny := false
		for _, p := range eg.Pods {
			if covered[p.UID] {
				helpedAny = true
				break
			}
		}
		if !helpedAny {
			out = append(out, i)
		}
	}
	return out
}

// skipReason says why the group cannot grow at all now ("" if it can).
func (pl *Planner) skipReason(gs clusterstate.NodeGroupState, in Input) Reason {
	id := gs.Group.Id()
	if off, info, until := pl.registry.BackedOff(id, in.Now); off {
		klog.V(2).InfoS("Scale-up: node group is backed off", "nodeGroup", id, "until", until.Format(time.RFC3339),
			"errorCode", info.ErrorCode, "errorMessage", info.ErrorMessage)
		return ReasonBackoff
	}
	if !gs.Healthy {
		return ReasonUnhealthy
	}
	if a, ok := gs.Group.(cloudprovider.AvailabilityReporter); ok {
		if why := a.Unavailable(); why != "" {
			// Held per size, not per group: the next option is taken.
			return Reason(why)
		}
	}
	if gs.Target >= gs.Group.MaxSize() {
		return ReasonMaxSize
	}
	if in.Templates[id] == nil {
		if err := in.TemplateErrors[id]; err != nil {
			klog.InfoS("Scale-up: node group has no template", "nodeGroup", id, "err", err)
		}
		return ReasonNoTemplate
	}
	return ""
}

// fittingPods is an equivalence group of pending pods (index: its place in
// the planning's list) whose exemplar fits a node like some template.
type fittingPods struct {
	index int
	group simulator.PodEquivalenceGroup
}

// fitsOn returns the equivalence groups whose exemplar fits on an
// empty node like tmpl; for the others the scheduler's reasons are
// recorded.
func (p *planning) fitsOn(tmpl *framework.NodeInfo) []fittingPods {
	return p.fitting(tmpl, nil, p.reasons)
}

// fitting checks the equivalence groups of the indexes (all when nil) on an
// empty node like tmpl; reasons, when not nil, gets the scheduler's reasons
// of those that do not fit.
func (p *planning) fitting(tmpl *framework.NodeInfo, indexes []int, reasons []map[Reason]int) []fittingPods {
	if indexes == nil {
		indexes = make([]int, len(p.egs))
		for i := range indexes {
			indexes[i] = i
		}
	}
	s := p.in.Snapshot
	probe := CloneTemplate(tmpl, "probe")
	s.Fork()
	defer s.Revert()
	if err := s.AddNodeInfo(probe); err != nil {
		klog.ErrorS(err, "Scale-up: cannot simulate a template", "template", probe.Node().Name)
		return nil
	}
	var out []fittingPods
	for _, i := range indexes {
		eg := p.egs[i]
		perr := p.checker.CheckPredicates(s, eg.Pods[0], probe.Node().Name)
		if perr == nil {
			out = append(out, fittingPods{index: i, group: eg})
			continue
		}
		if reasons == nil {
			continue
		}
		reason := strings.Join(perr.Reasons(), ", ")
		if reason == "" {
			reason = perr.Error()
		}
		reasons[i][Reason(reason)]++
	}
	return out
}

// room returns how many nodes the group, with the similar groups a
// balanced scale-up spreads them over, may add under their max sizes,
// their own hourly cost limits and the cluster-wide limits, and if none,
// why (and which cluster-wide limit, if one is the cause). As upstream's
// similar-node-group capacity threshold, the estimate is bounded by their
// combined room, not the group's own.
func (pl *Planner) room(gs clusterstate.NodeGroupState, tmpl *framework.NodeInfo, quotas *resourcequotas.Tracker,
	similar []clusterstate.NodeGroupState) (int, Reason, resourcequotas.Resource) {
	room, groupStop := quotas.GroupRoom(gs.Group, gs.Target, tmpl.Node(), gs.Group.MaxSize()-gs.Target)
	for _, sg := range similar {
		r, _ := quotas.GroupRoom(sg.Group, sg.Target, tmpl.Node(), max(0, sg.Group.MaxSize()-sg.Target))
		room += r
	}
	if room <= 0 && groupStop != "" {
		// The group's own hourly limit: not a cluster-wide one.
		return 0, Reason(quotas.Explain(groupStop, gs.Group, gs.Target, tmpl.Node())), ""
	}
	if pl.opts.MaxNodesPerScaleUp > 0 && room > pl.opts.MaxNodesPerScaleUp {
		room = pl.opts.MaxNodesPerScaleUp
	}
	room, limit := quotas.Room(tmpl.Node(), room)
	if limit == resourcequotas.Cost || limit == resourcequotas.Quota {
		// The reason names the figures (which differ by node price).
		return room, Reason(quotas.Explain(limit, gs.Group, gs.Target, tmpl.Node())), limit
	}
	return room, limitReason(limit), limit
}

// candidate is a node group that may grow now (or, for node
// autoprovisioning, be created), with its template and the pod equivalence
// groups that fit its nodes.
type candidate struct {
	gs   clusterstate.NodeGroupState
	tmpl *framework.NodeInfo
	fit  []fittingPods
}

// groups are the equivalence groups that fit the candidate's nodes.
func (c candidate) groups() []simulator.PodEquivalenceGroup {
	eqs := make([]simulator.PodEquivalenceGroup, len(c.fit))
	for i := range c.fit {
		eqs[i] = c.fit[i].group
	}
	return eqs
}

// similarGroups returns, with --balance-similar-node-groups, for each group
// the other groups whose nodes are like its own (Similar) and fit the same
// pending pods, as upstream's ComputeSimilarNodeGroups; nil otherwise.
// Groups that cannot grow now (backed off, unhealthy, at max) are not
// among fits, hence never similar.
func (pl *Planner) similarGroups(fits []candidate) map[string][]clusterstate.NodeGroupState {
	if !pl.opts.BalanceSimilarNodeGroups {
		return nil
	}
	out := map[string][]clusterstate.NodeGroupState{}
	for i, a := range fits {
		for j, b := range fits {
			if i != j && sameFit(a.fit, b.fit) && pl.similarity.Similar(a.tmpl, b.tmpl) {
				out[a.gs.Group.Id()] = append(out[a.gs.Group.Id()], b.gs)
			}
		}
	}
	return out
}

func sameFit(a, b []fittingPods) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].index != b[i].index {
			return false
		}
	}
	return true
}
