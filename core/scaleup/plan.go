package scaleup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/estimator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Reason says why a node group would not help a pod. The constants are
// the autoscaler's own; the scheduler's reasons (a failed predicate, as
// "Insufficient cpu") are carried as they come.
type Reason string

// Reasons a node group cannot help, as shown in NotTriggerScaleUp events.
const (
	ReasonMaxSize       Reason = "max node group size reached"
	ReasonBackoff       Reason = "in backoff after failed scale-up"
	ReasonUnhealthy     Reason = "node group unhealthy"
	ReasonNoTemplate    Reason = "no node template"
	ReasonMaxNodesTotal Reason = "max total nodes in cluster reached"
	ReasonMaxCores      Reason = "max cluster cpu limit reached"
	ReasonMaxMemory     Reason = "max cluster memory limit reached"
	ReasonNotAll        Reason = "cannot host all pods of an all-or-nothing request"
)

// limitReason is the Reason a cluster-wide limit gives.
func limitReason(r resourcequotas.Resource) Reason {
	switch r {
	case resourcequotas.Nodes:
		return ReasonMaxNodesTotal
	case resourcequotas.CPU:
		return ReasonMaxCores
	case resourcequotas.Memory:
		return ReasonMaxMemory
	}
	return ""
}

// Plan is what a scale-up decided, before anything is asked of the cloud:
// the options that would help, with the increases each would make, and
// for the pods no option helps, the reasons. Making it changes nothing and
// records nothing; the executor acts on it.
type Plan struct {
	// Options are the expander's candidates.
	Options []expander.Option
	// Increases per option's group: the option's group alone, or with
	// --balance-similar-node-groups spread over it and its similar groups.
	Increases map[string][]Increase
	// NotHelped are the pods no option helps, by equivalence group, with
	// the reasons their node groups gave.
	NotHelped []NotHelped
	// CappedByMaxNodes are the groups whose growth --max-nodes-total, not
	// their own limits, bounds.
	CappedByMaxNodes map[string]bool
	// LimitsHit are the cluster-wide limits that left some group no room,
	// each once.
	LimitsHit []resourcequotas.Resource
	// EstimateTimes are how long each option's estimate took.
	EstimateTimes []time.Duration
	// AllOrNothing: every option places all pods, and its group grows with
	// the provider's AtomicIncreaseSize (Input.AllOrNothing).
	AllOrNothing bool
}

// NotHelped are pods of one equivalence group that no option helps.
type NotHelped struct {
	Pods []*apiv1.Pod
	// Reasons counts, per reason, the node groups that gave it.
	Reasons map[Reason]int
}

// Increase is one group's size change.
type Increase struct {
	GroupID  string
	From, To int
	Max      int
}

func (i Increase) String() string {
	return fmt.Sprintf("{%s %d->%d (max: %d)}", i.GroupID, i.From, i.To, i.Max)
}

// planner computes a Plan: it reads the registry and the snapshot (forking
// and reverting it) and writes nothing else.
type planner struct {
	o   *Orchestrator
	in  Input
	egs []simulator.PodEquivalenceGroup
	// reasons, per equivalence group: why node groups would not help its
	// pods, with how many groups gave each reason.
	reasons []map[Reason]int
	plan    *Plan
	limits  map[resourcequotas.Resource]bool
}

// reasonAll records a reason that applies to the pods of every
// equivalence group.
func (p *planner) reasonAll(reason Reason) {
	for i := range p.reasons {
		p.reasons[i][reason]++
	}
}

// computePlan asks, for each group that may grow now, how many nodes like
// its template the pending pods need within its room, and records, per
// equivalence group, why the others would not help.
func (o *Orchestrator) computePlan(in Input) *Plan {
	p := &planner{o: o, in: in, egs: simulator.GroupPods(in.Pods),
		plan:   &Plan{Increases: map[string][]Increase{}, CappedByMaxNodes: map[string]bool{}, AllOrNothing: in.AllOrNothing},
		limits: map[resourcequotas.Resource]bool{}}
	p.reasons = make([]map[Reason]int, len(p.egs))
	for i := range p.reasons {
		p.reasons[i] = map[Reason]int{}
	}
	groups := o.registry.NodeGroups()
	quotas := in.Quotas.WithUpcoming(groups, templateNode(in.Templates))
	fits := p.groupFits(groups)
	var similar map[string][]clusterstate.NodeGroupState
	if !in.AllOrNothing {
		// An all-or-nothing increase is one call to one group.
		similar = o.similarGroups(fits)
	}
	est := estimator.NewBinpackingEstimator(o.checker, in.Snapshot)
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
			p.plan.Increases[f.gs.Group.Id()] = o.increasesFor(opt, f.gs, similar[f.gs.Group.Id()])
		}
	}
	p.newGroupOptions(&quotas, est)
	for _, i := range uncoveredGroups(p.egs, p.plan.Options) {
		p.plan.NotHelped = append(p.plan.NotHelped, NotHelped{Pods: p.egs[i].Pods, Reasons: p.reasons[i]})
	}
	return p.plan
}

// groupFits returns the groups that may grow now (skipReason) and whose
// template fits some pending pods.
func (p *planner) groupFits(groups []clusterstate.NodeGroupState) []groupFit {
	var out []groupFit
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
		if reason := p.o.skipReason(gs, p.in); reason != "" {
			klog.V(4).InfoS("Scale-up: skipping node group", "nodeGroup", id, "reason", reason)
			p.reasonAll(reason)
			continue
		}
		tmpl := p.in.Templates[id]
		if fit := p.fittingGroups(tmpl); len(fit) > 0 {
			out = append(out, groupFit{gs: gs, tmpl: tmpl, fit: fit})
		}
	}
	return out
}

// optionFor estimates the nodes a group needs for the pods that fit it,
// within its room; with no room it records the limit that stops it.
func (p *planner) optionFor(f groupFit, quotas *resourcequotas.Tracker, est *estimator.BinpackingEstimator, similar []clusterstate.NodeGroupState) (expander.Option, bool) {
	gs, tmpl, id := f.gs, f.tmpl, f.gs.Group.Id()
	room, reason, limit := p.o.room(gs, tmpl, quotas, similar)
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
	eqs := make([]simulator.PodEquivalenceGroup, len(f.fit))
	for i := range f.fit {
		eqs[i] = f.fit[i].group
	}
	estStart := time.Now()
	n, pods := est.Estimate(eqs, tmpl, room)
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
func (o *Orchestrator) increasesFor(opt expander.Option, gs clusterstate.NodeGroupState, similar []clusterstate.NodeGroupState) []Increase {
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
func (o *Orchestrator) skipReason(gs clusterstate.NodeGroupState, in Input) Reason {
	id := gs.Group.Id()
	if off, info, until := o.registry.BackedOff(id, in.Now); off {
		klog.V(2).InfoS("Scale-up: node group is backed off", "nodeGroup", id, "until", until.Format(time.RFC3339),
			"errorCode", info.ErrorCode, "errorMessage", info.ErrorMessage)
		return ReasonBackoff
	}
	if !gs.Healthy {
		return ReasonUnhealthy
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

type fitGroup struct {
	index int
	group simulator.PodEquivalenceGroup
}

// fittingGroups returns the equivalence groups whose exemplar fits on an
// empty node like tmpl; for the others the scheduler's reasons are
// recorded.
func (p *planner) fittingGroups(tmpl *framework.NodeInfo) []fitGroup {
	return p.fitting(tmpl, nil, p.reasons)
}

// fitting checks the equivalence groups of the indexes (all when nil) on an
// empty node like tmpl; reasons, when not nil, gets the scheduler's reasons
// of those that do not fit.
func (p *planner) fitting(tmpl *framework.NodeInfo, indexes []int, reasons []map[Reason]int) []fitGroup {
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
	var out []fitGroup
	for _, i := range indexes {
		eg := p.egs[i]
		perr := p.o.checker.CheckPredicates(s, eg.Pods[0], probe.Node().Name)
		if perr == nil {
			out = append(out, fitGroup{index: i, group: eg})
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
// balanced scale-up spreads them over, may add, and if none, why (and
// which cluster-wide limit, if one is the cause). As upstream's
// similar-node-group capacity threshold, the estimate is bounded by their
// combined room, not the group's own.
func (o *Orchestrator) room(gs clusterstate.NodeGroupState, tmpl *framework.NodeInfo, quotas *resourcequotas.Tracker,
	similar []clusterstate.NodeGroupState) (int, Reason, resourcequotas.Resource) {
	room := gs.Group.MaxSize() - gs.Target
	for _, sg := range similar {
		room += max(0, sg.Group.MaxSize()-sg.Target)
	}
	if o.opts.MaxNodesPerScaleUp > 0 && room > o.opts.MaxNodesPerScaleUp {
		room = o.opts.MaxNodesPerScaleUp
	}
	room, limit := quotas.Room(tmpl.Node(), room)
	return room, limitReason(limit), limit
}

// groupFit is a group that may grow now, with its template and the pod
// equivalence groups that fit its nodes.
type groupFit struct {
	gs   clusterstate.NodeGroupState
	tmpl *framework.NodeInfo
	fit  []fitGroup
}

// similarGroups returns, with --balance-similar-node-groups, for each group
// the other groups whose nodes are like its own (Similar) and fit the same
// pending pods, as upstream's ComputeSimilarNodeGroups; nil otherwise.
// Groups that cannot grow now (backed off, unhealthy, at max) are not
// among fits, hence never similar.
func (o *Orchestrator) similarGroups(fits []groupFit) map[string][]clusterstate.NodeGroupState {
	if !o.opts.BalanceSimilarNodeGroups {
		return nil
	}
	out := map[string][]clusterstate.NodeGroupState{}
	for i, a := range fits {
		for j, b := range fits {
			if i != j && sameFit(a.fit, b.fit) && o.similarity.Similar(a.tmpl, b.tmpl) {
				out[a.gs.Group.Id()] = append(out[a.gs.Group.Id()], b.gs)
			}
		}
	}
	return out
}

func sameFit(a, b []fitGroup) bool {
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

// Balance spreads n new nodes over groups so their targets end up as even
// as their maxima allow: each node goes to the group with the smallest
// target that still has room (ties by id).
func Balance(groups []clusterstate.NodeGroupState, n int) []Increase {
	sorted := append([]clusterstate.NodeGroupState(nil), groups...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Group.Id() < sorted[j].Group.Id() })
	to := make([]int, len(sorted))
	for i, gs := range sorted {
		to[i] = gs.Target
	}
	for ; n > 0; n-- {
		pick := -1
		for i, gs := range sorted {
			if to[i] >= gs.Group.MaxSize() {
				continue
			}
			if pick < 0 || to[i] < to[pick] {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		to[pick]++
	}
	var out []Increase
	for i, gs := range sorted {
		if to[i] > gs.Target {
			out = append(out, Increase{GroupID: gs.Group.Id(), From: gs.Target, To: to[i], Max: gs.Group.MaxSize()})
		}
	}
	return out
}

// ReasonSummary renders "2 max node group size reached, 1 Insufficient cpu".
func ReasonSummary(reasons map[Reason]int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", reasons[Reason(k)], k)
	}
	if len(parts) == 0 {
		return "no node groups"
	}
	return strings.Join(parts, ", ")
}
