package scaleup

import (
	"fmt"
	"sort"
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
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/estimator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// NotTriggerScaleUpInterval: a pod gets at most one NotTriggerScaleUp event
// per interval, so a pod pending for hours does not flood the event stream
// (one event per loop would be one every 10 s).
const NotTriggerScaleUpInterval = 10 * time.Minute

// Reasons a node group cannot help, as shown in NotTriggerScaleUp events.
const (
	ReasonMaxSize       = "max node group size reached"
	ReasonBackoff       = "in backoff after failed scale-up"
	ReasonUnhealthy     = "node group unhealthy"
	ReasonNoTemplate    = "no node template"
	ReasonMaxNodesTotal = "max total nodes in cluster reached"
	ReasonMaxCores      = "max cluster cpu limit reached"
	ReasonMaxMemory     = "max cluster memory limit reached"
)

// Orchestrator runs scale-ups.
type Orchestrator struct {
	opts      config.AutoscalingOptions
	provider  cloudprovider.CloudProvider
	registry  *clusterstate.Registry
	strategy  expander.Strategy
	checker   *simulator.PredicateChecker
	recorder  record.EventRecorder
	statusRef *apiv1.ObjectReference

	mu            sync.Mutex
	lastNotHelped map[types.UID]time.Time
}

// New returns an orchestrator. Events about groups go to the status
// ConfigMap opts.Namespace/opts.StatusConfigMapName.
func New(opts config.AutoscalingOptions, provider cloudprovider.CloudProvider, registry *clusterstate.Registry,
	strategy expander.Strategy, checker *simulator.PredicateChecker, recorder record.EventRecorder) *Orchestrator {
	return &Orchestrator{
		opts: opts, provider: provider, registry: registry, strategy: strategy, checker: checker, recorder: recorder,
		statusRef:     StatusConfigMapRef(opts),
		lastNotHelped: map[types.UID]time.Time{},
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
	// Nodes are all registered nodes (resource totals).
	Nodes []*apiv1.Node
	// Templates per group id, and why some groups have none.
	Templates      map[string]*framework.NodeInfo
	TemplateErrors map[string]error
	Now            time.Time
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

// Result says what a scale-up did.
type Result struct {
	Increases []Increase
	// Helped: pods the new nodes are for.
	Helped []*apiv1.Pod
	// NoGroup: pods no group can host now (NotTriggerScaleUp).
	NoGroup []*apiv1.Pod
}

// ScaledUp reports whether any group grew.
func (r *Result) ScaledUp() bool { return len(r.Increases) > 0 }

type usage struct {
	nodes         int
	milliCPU, mem int64
	maxMilliCPU   int64 // 0: no limit
	maxMem        int64
}

// ScaleUp finds the best group for in.Pods and grows it (and, with
// --balance-similar-node-groups, the groups like it).
func (o *Orchestrator) ScaleUp(in Input) (*Result, error) {
	res := &Result{}
	if len(in.Pods) == 0 {
		return res, nil
	}
	start := time.Now()
	defer metrics.UpdateDurationFromStart(metrics.ScaleUp, start)

	set := o.computeOptions(in)
	res.NoGroup = o.reportNotHelped(set, in.Now)
	untried, scaledUp := o.executeBest(set, in, res)
	if scaledUp {
		return res, nil
	}
	if len(untried) == 0 && anyTrue(set.cappedByTotal) {
		o.maxNodesTotalReached()
	}
	o.logNoScaleUp(set, in, res.NoGroup)
	return res, nil
}

// optionSet is what computeOptions found for one scale-up.
type optionSet struct {
	egs []simulator.PodEquivalenceGroup
	// reasons, per equivalence group: why node groups would not help its
	// pods, with how many groups gave each reason.
	reasons []map[string]int
	options []expander.Option
	similar map[string][]clusterstate.NodeGroupState
	// cappedByTotal: groups whose estimate --max-nodes-total bounds.
	cappedByTotal map[string]bool
	// skippedMetrics: the skipped-scale-up reasons counted already, so
	// each counts once per scale-up.
	skippedMetrics map[string]bool
}

// reasonAll records a reason that applies to the pods of every
// equivalence group.
func (s *optionSet) reasonAll(reason string) {
	for i := range s.reasons {
		s.reasons[i][reason]++
	}
}

// computeOptions asks, for each group that may grow now, how many nodes
// like its template the pending pods need within its room, and records,
// per equivalence group, why the others would not help.
func (o *Orchestrator) computeOptions(in Input) *optionSet {
	egs := simulator.GroupPods(in.Pods)
	groups := o.registry.NodeGroups()
	u := o.usage(in, groups)
	s := &optionSet{egs: egs, reasons: make([]map[string]int, len(egs)),
		cappedByTotal: map[string]bool{}, skippedMetrics: map[string]bool{}}
	for i := range s.reasons {
		s.reasons[i] = map[string]int{}
	}
	cands := o.candidates(in, groups, s)
	s.similar = o.similarGroups(cands)
	est := estimator.NewBinpackingEstimator(o.checker, in.Snapshot)
	for _, c := range cands {
		if opt, ok := o.optionFor(c, u, est, s); ok {
			s.options = append(s.options, opt)
		}
	}
	return s
}

// candidates: the groups that may grow now (skipReason) and whose template
// fits some pending pods.
func (o *Orchestrator) candidates(in Input, groups []clusterstate.NodeGroupState, s *optionSet) []candidate {
	var cands []candidate
	for _, gs := range groups {
		id := gs.Group.Id()
		if reason := o.skipReason(gs, in); reason != "" {
			klog.V(4).Infof("Scale-up: skipping node group %s: %s", id, reason)
			s.reasonAll(reason)
			continue
		}
		tmpl := in.Templates[id]
		if fit := o.fittingGroups(in.Snapshot, tmpl, s.egs, s.reasons); len(fit) > 0 {
			cands = append(cands, candidate{gs: gs, tmpl: tmpl, fit: fit})
		}
	}
	return cands
}

// optionFor estimates the nodes a candidate needs for the pods that fit
// it, within its room; with no room it records the limit that stops it.
func (o *Orchestrator) optionFor(c candidate, u usage, est *estimator.BinpackingEstimator, s *optionSet) (expander.Option, bool) {
	gs, tmpl, fit, id := c.gs, c.tmpl, c.fit, c.gs.Group.Id()
	room, limitReason, metricReason := o.room(gs, tmpl, u, s.similar[id])
	if room <= 0 {
		s.cappedByTotal[id] = boundByMaxTotal(o.opts.MaxNodesTotal, u.nodes, room, 0)
		klog.V(2).Infof("Scale-up: node group %s could host pending pods but %s", id, limitReason)
		for i := range fit {
			s.reasons[fit[i].index][limitReason]++
		}
		if !s.skippedMetrics[metricReason] {
			s.skippedMetrics[metricReason] = true
			metrics.RegisterSkippedScaleUp(metricReason)
		}
		return expander.Option{}, false
	}
	eqs := make([]simulator.PodEquivalenceGroup, len(fit))
	for i := range fit {
		eqs[i] = fit[i].group
	}
	estStart := time.Now()
	n, pods := est.Estimate(eqs, tmpl, room)
	metrics.UpdateDurationFromStart(metrics.Estimate, estStart)
	if n <= 0 || len(pods) == 0 {
		return expander.Option{}, false
	}
	s.cappedByTotal[id] = boundByMaxTotal(o.opts.MaxNodesTotal, u.nodes, room, n)
	klog.V(4).Infof("Scale-up: option: node group %s +%d node(s) for %d pod(s)", id, n, len(pods))
	return expander.Option{NodeGroup: gs.Group, NodeCount: n, Pods: pods, NodeInfo: tmpl,
		Debug: fmt.Sprintf("%s +%d for %d pods", id, n, len(pods))}, true
}

// boundByMaxTotal reports whether --max-nodes-total, rather than the
// group's own limits, is what stops a group's estimate: its room is all
// the cluster has left and the estimate takes all of it (no room at all
// counts as taken, pass estimate 0). The MaxNodesTotalReached event tells
// users the flag, not the group, keeps pods pending.
func boundByMaxTotal(maxNodesTotal, nodes, room, estimate int) bool {
	return maxNodesTotal > 0 && room >= maxNodesTotal-nodes && estimate >= room
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

// reportNotHelped gives the pods no group helps a NotTriggerScaleUp event
// with their groups' reasons, and returns them.
func (o *Orchestrator) reportNotHelped(s *optionSet, now time.Time) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, i := range uncoveredGroups(s.egs, s.options) {
		out = append(out, s.egs[i].Pods...)
		o.notHelped(s.egs[i].Pods, s.reasons[i], now)
	}
	return out
}

// logNoScaleUp says why nothing grew.
func (o *Orchestrator) logNoScaleUp(s *optionSet, in Input, noGroup []*apiv1.Pod) {
	if len(noGroup) > 0 {
		klog.Infof("Scale-up: %d pending pod(s) (%s) fit no node group: %s",
			len(noGroup), framework.PodNames(noGroup, 5), reasonSummary(reasonsFor(s.egs, s.reasons, noGroup[0])))
	} else {
		klog.V(2).Infof("Scale-up: no scale-up possible for %d pending pod(s)", len(in.Pods))
	}
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

func reasonsFor(egs []simulator.PodEquivalenceGroup, reasons []map[string]int, p *apiv1.Pod) map[string]int {
	for i, eg := range egs {
		for _, q := range eg.Pods {
			if q == p {
				return reasons[i]
			}
		}
	}
	return nil
}

// skipReason: why the group cannot grow at all now ("" if it can).
func (o *Orchestrator) skipReason(gs clusterstate.NodeGroupState, in Input) string {
	id := gs.Group.Id()
	if off, info, until := o.registry.BackedOff(id, in.Now); off {
		klog.V(2).Infof("Scale-up: node group %s is backed off until %s (%s %s)", id, until.Format(time.RFC3339), info.ErrorCode, info.ErrorMessage)
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
			klog.Warningf("Scale-up: %v", err)
		}
		return ReasonNoTemplate
	}
	return ""
}

type fitGroup struct {
	index int
	group simulator.PodEquivalenceGroup
}

// fittingGroups: the equivalence groups whose exemplar fits on an empty node
// like tmpl; for the others the scheduler's reasons are recorded.
func (o *Orchestrator) fittingGroups(s *simulator.ClusterSnapshot, tmpl *framework.NodeInfo, egs []simulator.PodEquivalenceGroup, reasons []map[string]int) []fitGroup {
	probe := CloneTemplate(tmpl, "probe")
	s.Fork()
	defer s.Revert()
	if err := s.AddNodeInfo(probe); err != nil {
		klog.Errorf("Scale-up: cannot simulate template %s: %v", probe.Node().Name, err)
		return nil
	}
	var out []fitGroup
	for i, eg := range egs {
		perr := o.checker.CheckPredicates(s, eg.Pods[0], probe.Node().Name)
		if perr == nil {
			out = append(out, fitGroup{index: i, group: eg})
			continue
		}
		reason := strings.Join(perr.Reasons(), ", ")
		if reason == "" {
			reason = perr.Error()
		}
		reasons[i][reason]++
	}
	return out
}

func nodeCapacity(n *apiv1.Node) (milliCPU, mem int64) {
	return n.Status.Capacity.Cpu().MilliValue(), n.Status.Capacity.Memory().Value()
}

// limits merges the provider's resource limiter with the flags: the
// tighter bound wins, so --cores-total / --memory-total always apply.
func (o *Orchestrator) limits() (maxMilliCPU, maxMem int64) {
	maxMilliCPU, maxMem = o.opts.MaxCoresTotal*1000, o.opts.MaxMemoryTotal
	rl, err := o.provider.GetResourceLimiter()
	if err != nil {
		klog.Warningf("Scale-up: provider resource limits unavailable (%v); using the flags", err)
		return
	}
	if rl != nil {
		if rl.HasMaxLimitSet(cloudprovider.ResourceNameCores) {
			if m := rl.GetMax(cloudprovider.ResourceNameCores) * 1000; maxMilliCPU <= 0 || m < maxMilliCPU {
				maxMilliCPU = m
			}
		}
		if rl.HasMaxLimitSet(cloudprovider.ResourceNameMemory) {
			if m := rl.GetMax(cloudprovider.ResourceNameMemory); maxMem <= 0 || m < maxMem {
				maxMem = m
			}
		}
	}
	return
}

// usage: nodes, cpu and memory of the cluster counting nodes not being
// deleted and nodes still coming up.
func (o *Orchestrator) usage(in Input, groups []clusterstate.NodeGroupState) usage {
	var u usage
	for _, n := range in.Nodes {
		if clusterstate.HasToBeDeletedTaint(n) {
			continue
		}
		c, m := nodeCapacity(n)
		u.nodes++
		u.milliCPU += c
		u.mem += m
	}
	for _, gs := range groups {
		if gs.UpcomingUnregistered == 0 {
			continue
		}
		u.nodes += gs.UpcomingUnregistered
		if t := in.Templates[gs.Group.Id()]; t != nil {
			c, m := nodeCapacity(t.Node())
			u.milliCPU += c * int64(gs.UpcomingUnregistered)
			u.mem += m * int64(gs.UpcomingUnregistered)
		}
	}
	u.maxMilliCPU, u.maxMem = o.limits()
	return u
}

// room: how many nodes the group, with the similar groups a balanced
// scale-up spreads them over, may add, and if none, why. As upstream's
// similar-node-group capacity threshold, the estimate is bounded by their
// combined room, not the group's own.
func (o *Orchestrator) room(gs clusterstate.NodeGroupState, tmpl *framework.NodeInfo, u usage, similar []clusterstate.NodeGroupState) (int, string, string) {
	room := gs.Group.MaxSize() - gs.Target
	for _, sg := range similar {
		room += max(0, sg.Group.MaxSize()-sg.Target)
	}
	if o.opts.MaxNodesPerScaleUp > 0 && room > o.opts.MaxNodesPerScaleUp {
		room = o.opts.MaxNodesPerScaleUp
	}
	if o.opts.MaxNodesTotal > 0 {
		if left := o.opts.MaxNodesTotal - u.nodes; left < room {
			room = left
			if room <= 0 {
				return 0, ReasonMaxNodesTotal, metrics.SkippedMaxNodesTotalReached
			}
		}
	}
	c, m := nodeCapacity(tmpl.Node())
	if u.maxMilliCPU > 0 && c > 0 {
		if left := int((u.maxMilliCPU - u.milliCPU) / c); left < room {
			room = left
			if room <= 0 {
				return 0, ReasonMaxCores, metrics.SkippedCPUResourceLimit
			}
		}
	}
	if u.maxMem > 0 && m > 0 {
		if left := int((u.maxMem - u.mem) / m); left < room {
			room = left
			if room <= 0 {
				return 0, ReasonMaxMemory, metrics.SkippedMemoryResourceLimit
			}
		}
	}
	return room, "", ""
}

// candidate is a group that may grow now, with its template and the pod
// equivalence groups that fit its nodes.
type candidate struct {
	gs   clusterstate.NodeGroupState
	tmpl *framework.NodeInfo
	fit  []fitGroup
}

// similarGroups: with --balance-similar-node-groups, for each candidate the
// other candidates whose nodes are like its own (Similar) and fit the same
// pending pods, as upstream's ComputeSimilarNodeGroups; nil otherwise.
// Groups that cannot grow now (backed off, unhealthy, at max) are not
// candidates, hence never similar.
func (o *Orchestrator) similarGroups(cands []candidate) map[string][]clusterstate.NodeGroupState {
	if !o.opts.BalanceSimilarNodeGroups {
		return nil
	}
	out := map[string][]clusterstate.NodeGroupState{}
	for i, a := range cands {
		for j, b := range cands {
			if i != j && sameFit(a.fit, b.fit) && Similar(a.tmpl, b.tmpl) {
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

// reasonSummary renders "2 max node group size reached, 1 Insufficient cpu".
func reasonSummary(reasons map[string]int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", reasons[k], k)
	}
	if len(parts) == 0 {
		return "no node groups"
	}
	return strings.Join(parts, ", ")
}

// notHelped emits NotTriggerScaleUp, at most once per pod per
// NotTriggerScaleUpInterval.
func (o *Orchestrator) notHelped(pods []*apiv1.Pod, reasons map[string]int, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	msg := "pod didn't trigger scale-up: " + reasonSummary(reasons)
	for uid, t := range o.lastNotHelped {
		if now.Sub(t) >= NotTriggerScaleUpInterval {
			delete(o.lastNotHelped, uid)
		}
	}
	for _, p := range pods {
		if _, recent := o.lastNotHelped[p.UID]; recent {
			continue
		}
		o.lastNotHelped[p.UID] = now
		o.recorder.Event(p, apiv1.EventTypeNormal, "NotTriggerScaleUp", msg)
	}
}
