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

	egs := simulator.GroupPods(in.Pods)
	groups := o.registry.NodeGroups()
	u := o.usage(in, groups)
	reasons := make([]map[string]int, len(egs))
	for i := range reasons {
		reasons[i] = map[string]int{}
	}
	addAll := func(reason string) {
		for i := range reasons {
			reasons[i][reason]++
		}
	}
	est := estimator.NewBinpackingEstimator(o.checker, in.Snapshot)
	skipped := map[string]bool{}
	var options []expander.Option
	var cands []candidate
	for _, gs := range groups {
		id := gs.Group.Id()
		if reason := o.skipReason(gs, in); reason != "" {
			klog.V(4).Infof("Scale-up: skipping node group %s: %s", id, reason)
			addAll(reason)
			continue
		}
		tmpl := in.Templates[id]
		if fit := o.fittingGroups(in.Snapshot, tmpl, egs, reasons); len(fit) > 0 {
			cands = append(cands, candidate{gs: gs, tmpl: tmpl, fit: fit})
		}
	}
	similar := o.similarGroups(cands)
	cappedByTotal := map[string]bool{} // groups whose estimate --max-nodes-total bounds
	for _, c := range cands {
		gs, tmpl, fit, id := c.gs, c.tmpl, c.fit, c.gs.Group.Id()
		room, limitReason, metricReason := o.room(gs, tmpl, u, similar[id])
		capped := o.opts.MaxNodesTotal > 0 && room >= o.opts.MaxNodesTotal-u.nodes
		if room <= 0 {
			cappedByTotal[id] = capped
			klog.V(2).Infof("Scale-up: node group %s could host pending pods but %s", id, limitReason)
			for i := range fit {
				reasons[fit[i].index][limitReason]++
			}
			if !skipped[metricReason] {
				skipped[metricReason] = true
				metrics.RegisterSkippedScaleUp(metricReason)
			}
			continue
		}
		eqs := make([]simulator.PodEquivalenceGroup, len(fit))
		for i := range fit {
			eqs[i] = fit[i].group
		}
		estStart := time.Now()
		n, pods := est.Estimate(eqs, tmpl, room)
		metrics.UpdateDurationFromStart(metrics.Estimate, estStart)
		if n <= 0 || len(pods) == 0 {
			continue
		}
		cappedByTotal[id] = capped && n >= room
		klog.V(4).Infof("Scale-up: option: node group %s +%d node(s) for %d pod(s)", id, n, len(pods))
		options = append(options, expander.Option{NodeGroup: gs.Group, NodeCount: n, Pods: pods, NodeInfo: tmpl,
			Debug: fmt.Sprintf("%s +%d for %d pods", id, n, len(pods))})
	}

	// Pods in equivalence groups no option covers get a NotTriggerScaleUp.
	covered := map[types.UID]bool{}
	for _, opt := range options {
		for _, p := range opt.Pods {
			covered[p.UID] = true
		}
	}
	for i, eg := range egs {
		helpedAny := false
		for _, p := range eg.Pods {
			if covered[p.UID] {
				helpedAny = true
				break
			}
		}
		if !helpedAny {
			res.NoGroup = append(res.NoGroup, eg.Pods...)
			o.notHelped(eg.Pods, reasons[i], in.Now)
		}
	}

	for len(options) > 0 {
		best := o.strategy.BestOption(options)
		if best == nil {
			break
		}
		if cappedByTotal[best.NodeGroup.Id()] {
			o.maxNodesTotalReached()
		}
		plan := o.plan(*best, similar[best.NodeGroup.Id()])
		done, failed := o.execute(plan, in.Templates, in.Now)
		if len(done) > 0 {
			res.Increases = done
			res.Helped = best.Pods
			o.triggered(best.Pods, done)
			choice := fmt.Sprintf("expander chose %s among %s", best.NodeGroup.Id(), expander.GroupIDs(options))
			if len(options) == 1 {
				choice = "the only node group that could help"
			}
			klog.Infof("Scale-up: %s for %d pending pod(s) (%s); %s", increasesString(done), len(best.Pods), PodNames(best.Pods, 5), choice)
			return res, nil
		}
		// Every group of the plan failed: try the next best option.
		var rest []expander.Option
		for _, opt := range options {
			if !failed[opt.NodeGroup.Id()] {
				rest = append(rest, opt)
			}
		}
		options = rest
	}
	if len(options) == 0 && anyTrue(cappedByTotal) {
		o.maxNodesTotalReached()
	}
	if len(res.NoGroup) > 0 {
		klog.Infof("Scale-up: %d pending pod(s) (%s) fit no node group: %s",
			len(res.NoGroup), PodNames(res.NoGroup, 5), reasonSummary(reasonsFor(egs, reasons, res.NoGroup[0])))
	} else {
		klog.V(2).Infof("Scale-up: no scale-up possible for %d pending pod(s)", len(in.Pods))
	}
	return res, nil
}

// maxNodesTotalReached records upstream's MaxNodesTotalReached event on the
// status ConfigMap: --max-nodes-total bounds a scale-up the pending pods need.
func (o *Orchestrator) maxNodesTotalReached() {
	klog.V(1).Infof("Scale-up: max total nodes in cluster reached (--max-nodes-total=%d)", o.opts.MaxNodesTotal)
	o.recorder.Eventf(o.statusRef, apiv1.EventTypeWarning, "MaxNodesTotalReached", "Max total nodes in cluster reached: %v", o.opts.MaxNodesTotal)
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

// execute asks the cloud for the increases. Failures back the group off.
func (o *Orchestrator) execute(plan []Increase, templates map[string]*framework.NodeInfo, now time.Time) (done []Increase, failed map[string]bool) {
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
		delta := inc.To - inc.From
		if err := g.IncreaseSize(delta); err != nil {
			failed[inc.GroupID] = true
			klog.Errorf("Scale-up: node group %s %d->%d failed: %v", inc.GroupID, inc.From, inc.To, err)
			metrics.RegisterError(metrics.CloudProviderError)
			metrics.RegisterFailedNodeCreations(metrics.FailedScaleUpCloudProviderError, delta)
			o.registry.RegisterFailedScaleUp(g, metrics.FailedScaleUpCloudProviderError,
				clusterstate.BackoffInfo{ErrorCode: "cloudProviderError", ErrorMessage: err.Error()}, now)
			o.recorder.Eventf(o.statusRef, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
				"Scale-up failed for group %s: %v", inc.GroupID, err)
			continue
		}
		o.registry.RegisterScaleUp(g, delta, now)
		gpuName, gpuType := "", ""
		if t := templates[inc.GroupID]; t != nil {
			if gpu := o.provider.GetNodeGpuConfig(t.Node()); gpu != nil {
				gpuName, gpuType = string(gpu.ExtendedResourceName), gpu.Type
			}
		}
		metrics.RegisterScaleUp(delta, gpuName, gpuType)
		o.recorder.Eventf(o.statusRef, apiv1.EventTypeNormal, "ScaledUpGroup",
			"Scale-up: setting group %s size to %d instead of %d (max: %d)", inc.GroupID, inc.To, inc.From, inc.Max)
		done = append(done, inc)
	}
	return done, failed
}

func increasesString(incs []Increase) string {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = fmt.Sprintf("node group %s %d->%d (max: %d)", inc.GroupID, inc.From, inc.To, inc.Max)
	}
	return strings.Join(parts, ", ")
}

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
