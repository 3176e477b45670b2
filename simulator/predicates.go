package simulator

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	schedruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// BasePlugins are the default-profile filter plugins that decide fit from
// the snapshot alone: nodes, pods and the DRA objects (DynamicResources
// reads them through a manager backed by the snapshot, see dra.Manager).
// They are what NewPredicateChecker enables.
//
// Left out, and why:
//   - storage plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding,
//     VolumeZone): they look up each pod's PersistentVolumeClaims in an
//     informer; against an empty one they call every pod with a claim
//     unschedulable, which would block scale-down of any node running one.
//     NewPredicateCheckerWithInformers enables them with real informers.
//   - NodeDeclaredFeatures: template nodes built from a DOKS pool carry no
//     declared features, so pods needing one would never fit a new node.
//   - GangScheduling, PodGroupPodsCount, TopologyPlacementGenerator,
//     DeferredPodScheduling, SchedulingGates: workload/queue concerns, not
//     whether a pod fits a node.
//   - score plugins: the simulation only asks "fits or not".
var BasePlugins = []string{
	names.NodeUnschedulable,
	names.NodeName,
	names.TaintToleration,
	names.NodeAffinity,
	names.NodePorts,
	names.NodeResourcesFit,
	names.PodTopologySpread,
	names.InterPodAffinity,
	names.DynamicResources,
}

// StoragePlugins are added by NewPredicateCheckerWithInformers.
var StoragePlugins = []string{
	names.VolumeRestrictions,
	names.NodeVolumeLimits,
	names.VolumeBinding,
	names.VolumeZone,
}

var (
	schedulerMetricsOnce sync.Once
	sharedRecorder       *schedmetrics.MetricAsyncRecorder
)

// PredicateChecker runs the kube-scheduler framework's PreFilter and Filter
// plugins against a ClusterSnapshot. It is not safe for concurrent use.
type PredicateChecker struct {
	fw      schedframework.Framework
	lister  *frameworkLister
	plugins []string
	// preFilterPlugins are the framework's PreFilter plugins, in order.
	preFilterPlugins []string
	// hints caches the removal simulation's pod hashes across loops.
	hints hintHashes
}

// pluginCtx is the context of plugin runs. The framework's methods take
// one, but the plugins here work in memory on the snapshot and return
// promptly: nothing has a reason to cancel them, and callers pass none.
var pluginCtx = context.Background()

// NewPredicateChecker builds a framework with BasePlugins. Plugins that read
// cluster objects other than nodes and pods (InterPodAffinity reads
// Namespaces for namespaceSelector terms) get an informer factory without a
// client that is never started: its listers are empty, so such terms match
// no namespace other than the ones listed explicitly. (A fake clientset
// would do the same and link every API group's fake client and the
// apply-configuration machinery into the binary: megabytes of resident code
// and heap for a path only tests and benchmarks take.)
func NewPredicateChecker(opts ...CheckerOption) (*PredicateChecker, error) {
	factory := informers.NewSharedInformerFactory(nil, 0)
	return newPredicateChecker(factory, BasePlugins, false, opts...)
}

// CheckerOption changes how a PredicateChecker's framework is built.
type CheckerOption func(*checkerConfig)

type checkerConfig struct {
	profile *schedconfig.KubeSchedulerProfile
}

// WithSchedulerProfile builds the framework from the cluster's scheduler
// profile (--scheduler-config-file, LoadSchedulerProfile) instead of the
// default one: of the plugins the checker can run, those the profile runs
// at Filter, with the profile's plugin arguments.
func WithSchedulerProfile(p *schedconfig.KubeSchedulerProfile) CheckerOption {
	return func(c *checkerConfig) { c.profile = p }
}

// NewPredicateCheckerWithInformers builds a framework with BasePlugins and
// StoragePlugins, reading PersistentVolumeClaims, PersistentVolumes,
// StorageClasses, CSINodes, CSIDrivers and Namespaces from factory. The
// plugins register their informers while being built, so start factory and
// wait for its caches after this call.
func NewPredicateCheckerWithInformers(factory informers.SharedInformerFactory, opts ...CheckerOption) (*PredicateChecker, error) {
	enabled := slices.Concat(BasePlugins, StoragePlugins)
	return newPredicateChecker(factory, enabled, true, opts...)
}

func newPredicateChecker(factory informers.SharedInformerFactory, enabled []string, withCSI bool, opts ...CheckerOption) (*PredicateChecker, error) {
	var cc checkerConfig
	for _, o := range opts {
		o(&cc)
	}
	schedulerMetricsOnce.Do(func() {
		// The framework records into these; unregistered they are nil.
		schedmetrics.Register()
		// One recorder for every checker: each framework would otherwise start
		// its own flushing goroutine that never ends.
		sharedRecorder = schedmetrics.NewMetricsAsyncRecorder(1000, time.Second, nil)
	})

	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("default scheduler configuration: %w", err)
	}
	if len(cfg.Profiles) == 0 {
		return nil, fmt.Errorf("default scheduler configuration has no profile")
	}
	def := cfg.Profiles[0]
	if cc.profile != nil {
		def = *cc.profile
		enabled = filterPlugins(cc.profile, enabled)
	}
	multi := []schedconfig.Plugin{{Name: names.PrioritySort}, {Name: names.DefaultBinder}}
	for _, name := range enabled {
		multi = append(multi, schedconfig.Plugin{Name: name})
	}
	profile := &schedconfig.KubeSchedulerProfile{
		SchedulerName: def.SchedulerName,
		Plugins: &schedconfig.Plugins{
			MultiPoint: schedconfig.PluginSet{Enabled: multi},
			// Reserve runs only to let DynamicResources record the claims it
			// allocated for a placed pod (in the snapshot, through the DRA
			// manager). VolumeBinding's Reserve would assume volumes in the
			// informers' shared cache, which a simulation must not touch.
			Reserve: reserve(enabled),
		},
		// Plugin arguments (NodeResourcesFit, PodTopologySpread, ...) as the
		// default profile, or --scheduler-config-file's, has them.
		PluginConfig: def.PluginConfig,
	}

	lister := &frameworkLister{}
	fwOpts := []schedruntime.Option{
		schedruntime.WithInformerFactory(factory),
		schedruntime.WithSnapshotSharedLister(lister),
		schedruntime.WithSharedDRAManager(dra.NewManager(lister.dra)),
		schedruntime.WithMetricsRecorder(sharedRecorder),
		// PreFilter's per-node counting is CPU-bound: more workers than
		// processors only adds scheduling overhead.
		schedruntime.WithParallelism(runtime.GOMAXPROCS(0)),
	}
	if withCSI {
		fwOpts = append(fwOpts, schedruntime.WithSharedCSIManager(csiManager{factory.Storage().V1().CSINodes().Lister()}))
	}
	ctx := context.Background()
	registry := plugins.NewInTreeRegistry()
	withCheapDRASkip(registry)
	f, err := schedruntime.NewFramework(ctx, registry, profile, fwOpts...)
	if err != nil {
		return nil, fmt.Errorf("building scheduler framework: %w", err)
	}
	klog.V(1).InfoS("Scheduling simulation uses the kube-scheduler framework", "plugins", enabled)
	var preFilters []string
	for _, p := range f.ListPlugins().PreFilter.Enabled {
		preFilters = append(preFilters, p.Name)
	}
	return &PredicateChecker{fw: f, lister: lister, plugins: slices.Clone(enabled), preFilterPlugins: preFilters}, nil
}

// reserve is the Reserve extension point: DynamicResources only, when it
// runs.
func reserve(enabled []string) schedconfig.PluginSet {
	set := schedconfig.PluginSet{Disabled: []schedconfig.Plugin{{Name: "*"}}}
	if slices.Contains(enabled, names.DynamicResources) {
		set.Enabled = []schedconfig.Plugin{{Name: names.DynamicResources}}
	}
	return set
}

// reserveClaims allocates pod's devices for nodeName in s, after Filter
// found that it fits there, and returns the pod to store there: the
// DynamicResources plugin's Reserve stores the allocations it computed in
// Filter (a device for each unallocated claim, and for extended resources
// a DeviceClass serves, a claim of their own), and the pod becomes a
// consumer of all its claims. A pod given a claim for its extended
// resources is stored as a copy naming it in
// status.extendedResourceClaimStatus, as the scheduler's PreBind writes it.
// Pods that can hold no device cost nothing.
func (c *PredicateChecker) reserveClaims(s *ClusterSnapshot, pf *preFilterOutcome, pod *apiv1.Pod, nodeName string) (*apiv1.Pod, error) {
	extended := s.dra.ServesExtendedResources(pod)
	if len(pod.Spec.ResourceClaims) == 0 && !extended && pod.Status.ExtendedResourceClaimStatus == nil {
		return pod, nil
	}
	stored := pod
	// Reserve reads the state of the plugin's own PreFilter, which
	// cheapDRASkip lets run for these pods only.
	if mayNeedDevices(pod) {
		name := dra.SimulatedExtendedClaimName(pod.Name)
		before := s.dra.Claim(pod.Namespace, name)
		c.lister.snapshot = s
		if st := c.fw.RunReservePluginsReserve(pluginCtx, pf.state, pod, nodeName); !st.IsSuccess() {
			return nil, fmt.Errorf("allocating the devices of pod %s on %s: %w", podKey(pod), nodeName, st.AsError())
		}
		if after := s.dra.Claim(pod.Namespace, name); after != nil && after != before {
			stored = withExtendedClaim(pod, name)
		}
	}
	// A moved pod's claim went with its old place (UnreservePodClaims); a
	// device plugin serves it here, or nothing does.
	if st := stored.Status.ExtendedResourceClaimStatus; stored == pod && st != nil && s.dra.Claim(pod.Namespace, st.ResourceClaimName) == nil {
		stored = withExtendedClaim(pod, "")
	}
	return stored, s.dra.ReservePodClaims(stored)
}

// withExtendedClaim returns a shallow copy of p whose
// status.extendedResourceClaimStatus names claimName (none when ""). The
// request mappings are left out: the plugin keeps them to itself, and no
// part of the simulation reads them.
func withExtendedClaim(p *apiv1.Pod, claimName string) *apiv1.Pod {
	cp := *p
	cp.Status.ExtendedResourceClaimStatus = nil
	if claimName != "" {
		cp.Status.ExtendedResourceClaimStatus = &apiv1.PodExtendedResourceClaimStatus{ResourceClaimName: claimName}
	}
	return &cp
}

// SchedulePod places pod on nodeName in s when it fits there, allocating
// its claims: CheckPredicates, then the placement. exemplar is as for
// ClusterSnapshot.AddEquivalentPod (nil for none).
func (c *PredicateChecker) SchedulePod(s *ClusterSnapshot, pod, exemplar *apiv1.Pod, nodeName string) *PredicateError {
	pf, perr := c.checkNode(s, pod, nodeName)
	if perr != nil {
		return perr
	}
	return c.place(s, pf, pod, exemplar, nodeName)
}

// ScheduleOnAnyNodeOf is FitsAnyNodeOf, then places pod on the node found
// (allocating its claims).
func (c *PredicateChecker) ScheduleOnAnyNodeOf(s *ClusterSnapshot, pod, exemplar *apiv1.Pod, nodeNames []string) (fit string, rejected []string, err error) {
	pf, fit, rejected, err := c.fitsAnyNodeOf(s, pod, nodeNames)
	if err != nil {
		return "", rejected, err
	}
	if perr := c.place(s, pf, pod, exemplar, fit); perr != nil {
		return "", rejected, perr
	}
	return fit, rejected, nil
}

// place adds pod to nodeName once it passed the filters with pf.
func (c *PredicateChecker) place(s *ClusterSnapshot, pf *preFilterOutcome, pod, exemplar *apiv1.Pod, nodeName string) *PredicateError {
	internal := func(err error) *PredicateError {
		return &PredicateError{pod: pod, nodeName: nodeName, plugin: "ClusterSnapshot", internal: err}
	}
	stored, err := c.reserveClaims(s, pf, pod, nodeName)
	if err != nil {
		return internal(err)
	}
	if err := s.AddEquivalentPod(stored, exemplar, nodeName); err != nil {
		return internal(err)
	}
	return nil
}

// Plugins lists the enabled filter plugins.
func (c *PredicateChecker) Plugins() []string { return slices.Clone(c.plugins) }

// PredicateError says why a pod does not fit a node.
type PredicateError struct {
	// pod is named only when the error is printed: a pending pod checked
	// against thousands of full nodes is refused by each of them.
	pod      *apiv1.Pod
	nodeName string
	plugin   string
	reasons  []string
	// internal is set when a plugin failed to run rather than rejected.
	internal error
}

// Error describes the failure for logs.
func (e *PredicateError) Error() string {
	where := "any node"
	if e.nodeName != "" {
		where = "node " + e.nodeName
	}
	if e.internal != nil {
		return fmt.Sprintf("pod %s on %s: plugin %s failed: %v", podKey(e.pod), where, e.plugin, e.internal)
	}
	return fmt.Sprintf("pod %s does not fit %s: %s: %s", podKey(e.pod), where, e.plugin, strings.Join(e.reasons, ", "))
}

// Reasons are the scheduler plugin's failure reasons, e.g. "Insufficient cpu".
func (e *PredicateError) Reasons() []string { return slices.Clone(e.reasons) }

// PluginName is the plugin that rejected the pod.
func (e *PredicateError) PluginName() string { return e.plugin }

// IsInternal tells a plugin failure (bad input, missing data) from a
// scheduling rejection.
func (e *PredicateError) IsInternal() bool { return e.internal != nil }

func statusToError(pod *apiv1.Pod, nodeName string, st *fwk.Status) *PredicateError {
	pe := &PredicateError{pod: pod, nodeName: nodeName, plugin: st.Plugin(), reasons: st.Reasons()}
	if st.IsError() {
		pe.internal = st.AsError()
	}
	if len(pe.reasons) == 0 {
		pe.reasons = []string{st.Message()}
	}
	return pe
}

// preFilterOutcome is what PreFilter leaves for the Filter calls.
type preFilterOutcome struct {
	state *schedframework.CycleState
	// result may restrict the candidate nodes; restrictedBy names the
	// plugins that did.
	result       *fwk.PreFilterResult
	restrictedBy string
}

// preFilter runs the PreFilter plugins for pod against s.
func (c *PredicateChecker) preFilter(s *ClusterSnapshot, pod *apiv1.Pod) (*preFilterOutcome, *PredicateError) {
	c.lister.snapshot = s
	s.prepareForScheduling()
	state := schedframework.NewCycleState()
	result, st, restricting := c.fw.RunPreFilterPlugins(pluginCtx, state, pod)
	if !st.IsSuccess() {
		return nil, statusToError(pod, "", st)
	}
	out := &preFilterOutcome{state: state, result: result}
	if !result.AllNodes() {
		out.restrictedBy = strings.Join(sets.List(restricting), ",")
	}
	return out, nil
}

func (c *PredicateChecker) filter(pf *preFilterOutcome, pod *apiv1.Pod, info *schedframework.NodeInfo) *PredicateError {
	name := info.Node().Name
	if !pf.result.AllNodes() && !pf.result.NodeNames.Has(name) {
		return &PredicateError{pod: pod, nodeName: name, plugin: pf.restrictedBy,
			reasons: []string{fmt.Sprintf("node(s) didn't satisfy plugin(s) %s", pf.restrictedBy)}}
	}
	if st := c.fw.RunFilterPlugins(pluginCtx, pf.state, pod, info); !st.IsSuccess() {
		perr := statusToError(pod, name, st)
		c.nameClaims(perr, pod)
		return perr
	}
	return nil
}

// nameClaims adds the pod's claims and their device classes to a
// DynamicResources rejection, whose own words ("cannot allocate all
// claims") name neither: NotTriggerScaleUp events and logs then say which
// claim no node group can satisfy.
func (c *PredicateChecker) nameClaims(perr *PredicateError, pod *apiv1.Pod) {
	if perr.plugin != names.DynamicResources || perr.internal != nil || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	d := c.lister.snapshot.DRA()
	if d == nil {
		return
	}
	claims := d.DescribePodClaims(pod)
	for i, r := range perr.reasons {
		perr.reasons[i] = r + " (" + claims + ")"
	}
}

// CheckPredicates returns nil when pod fits nodeName in the snapshot.
func (c *PredicateChecker) CheckPredicates(s *ClusterSnapshot, pod *apiv1.Pod, nodeName string) *PredicateError {
	_, perr := c.checkNode(s, pod, nodeName)
	return perr
}

// checkNode runs PreFilter and Filter for pod on nodeName, and returns
// PreFilter's outcome for the placement when it fits.
func (c *PredicateChecker) checkNode(s *ClusterSnapshot, pod *apiv1.Pod, nodeName string) (*preFilterOutcome, *PredicateError) {
	info, found := s.nodes[nodeName]
	if !found {
		return nil, &PredicateError{pod: pod, nodeName: nodeName, plugin: "ClusterSnapshot",
			internal: fmt.Errorf("node %s not in the snapshot", nodeName)}
	}
	pf, perr := c.preFilter(s, pod)
	if perr != nil {
		perr.nodeName = nodeName
		return nil, perr
	}
	if perr := c.filter(pf, pod, info); perr != nil {
		return nil, perr
	}
	return pf, nil
}

// FitsAnyNodeMatching returns the name of a node that fits pod and passes
// match (nil = any). Nodes are tried in the snapshot's stable order.
func (c *PredicateChecker) FitsAnyNodeMatching(s *ClusterSnapshot, pod *apiv1.Pod, match func(*framework.NodeInfo) bool) (string, error) {
	var m func(*schedframework.NodeInfo) bool
	if match != nil {
		m = func(info *schedframework.NodeInfo) bool { return match(s.toNodeInfo(info)) }
	}
	_, name, _, err := c.fitsAnyNode(s, pod, m, 0)
	return name, err
}

// FitsAnyNodeOf tries nodeNames in the given order (names not in the
// snapshot are skipped) and returns the first that pod fits, plus the names
// tried and refused before it. PreFilter runs once for all of them, so this
// is much cheaper than calling CheckPredicates per node. The error is a
// *PredicateError when the pod fails PreFilter or a plugin breaks, another
// error when every node refused it.
func (c *PredicateChecker) FitsAnyNodeOf(s *ClusterSnapshot, pod *apiv1.Pod, nodeNames []string) (fit string, rejected []string, err error) {
	_, fit, rejected, err = c.fitsAnyNodeOf(s, pod, nodeNames)
	return fit, rejected, err
}

func (c *PredicateChecker) fitsAnyNodeOf(s *ClusterSnapshot, pod *apiv1.Pod, nodeNames []string) (pf *preFilterOutcome, fit string, rejected []string, err error) {
	pf, perr := c.preFilter(s, pod)
	if perr != nil {
		return nil, "", nil, perr
	}
	reasons := map[string]int{}
	for _, name := range nodeNames {
		info, found := s.nodes[name]
		if !found {
			continue
		}
		ferr := c.filter(pf, pod, info)
		if ferr == nil {
			return pf, name, rejected, nil
		}
		if ferr.IsInternal() {
			return nil, "", rejected, ferr
		}
		rejected = append(rejected, name)
		for _, r := range ferr.reasons {
			reasons[r]++
		}
	}
	return nil, "", rejected, &noFitError{pod: podKey(pod), tried: len(rejected), reasons: reasons}
}

// fitsAnyNode tries the nodes of s from index start on, wrapping around, and
// returns the index and name of the first that passes match and fits. The
// start index lets equivalent pods resume where the previous one landed
// without giving up completeness.
func (c *PredicateChecker) fitsAnyNode(s *ClusterSnapshot, pod *apiv1.Pod, match func(*schedframework.NodeInfo) bool, start int) (int, string, *preFilterOutcome, error) {
	return c.fitsAnyNodeShared(s, pod, match, start, nil, 0)
}

// fitsAnyNodeShared is fitsAnyNode for a pod of equivalence class key, with
// PreFilter's outcome shared through memo (see preFilterMemo).
func (c *PredicateChecker) fitsAnyNodeShared(s *ClusterSnapshot, pod *apiv1.Pod, match func(*schedframework.NodeInfo) bool, start int,
	memo preFilterMemo, key uint64) (int, string, *preFilterOutcome, error) {
	pf, perr := c.preFilterShared(s, pod, memo, key)
	if perr != nil {
		return -1, "", nil, perr
	}
	list := s.nodeList()
	n := len(list)
	if start < 0 || start >= n {
		start = 0
	}
	reasons := map[string]int{}
	tried := 0
	for k := 0; k < n; k++ {
		i := (start + k) % n
		info := list[i].(*schedframework.NodeInfo)
		if match != nil && !match(info) {
			continue
		}
		tried++
		ferr := c.filter(pf, pod, info)
		if ferr == nil {
			return i, info.Node().Name, pf, nil
		}
		if ferr.IsInternal() {
			return -1, "", nil, ferr
		}
		for _, r := range ferr.reasons {
			reasons[r]++
		}
	}
	return -1, "", nil, &noFitError{pod: podKey(pod), tried: tried, reasons: reasons}
}

// noFitError says the pod passed PreFilter but no candidate node passed
// Filter.
type noFitError struct {
	pod     string
	tried   int
	reasons map[string]int
}

func (e *noFitError) Error() string {
	parts := make([]string, 0, len(e.reasons))
	for r, n := range e.reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("pod %s fits none of %d candidate nodes: %s", e.pod, e.tried, strings.Join(parts, ", "))
}

func podKey(p *apiv1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return p.Namespace + "/" + p.Name
}

// csiManager serves CSINodes from an informer to NodeVolumeLimits.
type csiManager struct{ lister storagelisters.CSINodeLister }

func (m csiManager) CSINodes() fwk.CSINodeLister { return csiNodeLister(m) }

type csiNodeLister csiManager

func (l csiNodeLister) List() ([]*storagev1.CSINode, error) {
	return l.lister.List(labels.Everything())
}
func (l csiNodeLister) Get(name string) (*storagev1.CSINode, error) {
	return l.lister.Get(name)
}
