// Package clusterstate keeps what the autoscaler knows about its node groups
// between iterations: per group the cloud target, the registered nodes by
// readiness, the nodes still coming up, instances that never registered,
// scale-up requests with their deadlines and the backoff of groups whose
// scale-ups failed. From that it judges cluster and group health, gives up
// on nodes that did not arrive in time, and builds the status the autoscaler
// publishes in its ConfigMap.
package clusterstate

import (
	"fmt"
	"maps"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Readiness counts nodes of a group or of the cluster.
type Readiness struct {
	Ready        int // registered and Ready
	Unready      int // registered, not Ready, older than MaxNodeStartupTime
	NotStarted   int // registered, not Ready yet, younger than MaxNodeStartupTime
	BeingDeleted int // carrying ToBeDeletedTaint
	// ResourceUnready: the part of Unready that is Ready but still lacks its
	// GPU resource (see ResourceUnready).
	ResourceUnready int
	// Registered = Ready + Unready + NotStarted + BeingDeleted.
	Registered int
	// Unregistered: cloud instances without a Node, within the provision time.
	Unregistered int
	// LongUnregistered: cloud instances without a Node for longer than the
	// provision time, or in error.
	LongUnregistered int
}

// NodeGroupState is what the registry knows about one group this iteration.
type NodeGroupState struct {
	Group     cloudprovider.NodeGroup
	Target    int
	Readiness Readiness
	// Upcoming: nodes the cloud should deliver that are not usable yet
	// (not registered, or registered but not started). The core simulates
	// them as template nodes so pending pods that will land there do not
	// cause a second scale-up.
	Upcoming int
	// UpcomingUnregistered: the part of Upcoming with no Node object yet.
	UpcomingUnregistered int
	Healthy              bool
	Options              config.NodeGroupAutoscalingOptions
}

// ScaleUpRequest is a scale-up the autoscaler asked for and is waiting on.
type ScaleUpRequest struct {
	GroupID         string
	Increase        int
	Time            time.Time
	ExpectedAddTime time.Time
	// failed: part of it already failed, so its completion must not clear
	// the group's backoff.
	failed bool
}

type groupState struct {
	NodeGroupState
	inTarget     int // registered nodes the cloud counts in the target
	instances    []cloudprovider.Instance
	nodesErr     error
	deletingIDs  map[string]bool // provider IDs of instances the cloud is deleting
	errored      []cloudprovider.Instance
	longUnreg    []cloudprovider.Instance
	unregistered []cloudprovider.Instance
}

type unregisteredInstance struct {
	since      time.Time
	gaveUp     time.Time // zero until the registry gave up on it
	lastDelete time.Time // last time its deletion was asked for
}

// retryDeleteInterval is how often the deletion of a given-up instance the
// cloud still lists is asked for again.
const retryDeleteInterval = time.Minute

type condition struct {
	status string
	since  time.Time
}

// Registry is the cluster state. It has no lock: only the core's loop
// goroutine calls it (scale-down's removals report to the deletion tracker,
// not here), so its methods are not safe for concurrent use.
type Registry struct {
	provider cloudprovider.CloudProvider
	opts     config.AutoscalingOptions
	backoff  *Backoff

	groups     map[string]*groupState
	groupOrder []string
	nodes      map[string]nodeEntry // node name → its group and readiness
	gone       map[string]bool      // nodes whose instance the cloud no longer has
	total      Readiness
	healthy    bool
	lastUpdate time.Time

	unregistered      map[string]*unregisteredInstance // "<group>/<instance id>"
	requests          map[string]*ScaleUpRequest       // by group id
	sizeMismatchSince map[string]time.Time             // by group id
	candidates        map[string]int                   // scale-down candidates by group id
	conditions        map[string]condition
	taints            TaintConfig
	gpuLabel          string
	// publishesDevices tells a node for which a DRA driver published
	// ResourceSlices (nil: none does).
	publishesDevices func(nodeName string) bool
	// message is the status ConfigMap's message: what the operator must fix.
	message string
	// consolidation is the status ConfigMap's consolidation section (nil:
	// consolidation is off).
	consolidation *api.ConsolidationStatus
	// limits is the status ConfigMap's limits section (nil: none).
	limits *api.LimitsStatus
}

// NewRegistry returns an empty registry.
func NewRegistry(provider cloudprovider.CloudProvider, opts config.AutoscalingOptions) *Registry {
	return &Registry{
		provider:          provider,
		opts:              opts,
		backoff:           NewBackoff(opts.InitialNodeGroupBackoffDuration, opts.MaxNodeGroupBackoffDuration, opts.NodeGroupBackoffResetTimeout),
		groups:            map[string]*groupState{},
		nodes:             map[string]nodeEntry{},
		healthy:           true,
		unregistered:      map[string]*unregisteredInstance{},
		requests:          map[string]*ScaleUpRequest{},
		sizeMismatchSince: map[string]time.Time{},
		candidates:        map[string]int{},
		conditions:        map[string]condition{},
		taints:            NewTaintConfig(opts),
		gpuLabel:          provider.GPULabel(),
	}
}

func instanceKey(group, id string) string { return group + "/" + id }

// SetDevicePublishers tells the registry which nodes have devices published
// in ResourceSlices (by a DRA driver), for the next UpdateNodes: a GPU node
// is ready for its pods once it advertises its GPU either way (see
// ResourceUnready).
func (r *Registry) SetDevicePublishers(publishes func(nodeName string) bool) {
	r.publishesDevices = publishes
}

// UpdateNodes recomputes the state from the provider's groups (after its
// Refresh) and the cluster's nodes. An error means the provider could not
// say what a group's target is; the loop should not act on stale state.
func (r *Registry) UpdateNodes(nodes []*apiv1.Node, now time.Time) error {
	r.lastUpdate = now

	u, err := r.collectGroups()
	if err != nil {
		return err
	}
	r.classifyNodes(u, nodes, now)
	r.countUnregistered(u, now)
	r.settleGroups(u, nodes)
	r.publish(u, now)
	return nil
}

// update is the state one UpdateNodes builds before it replaces the
// registry's: nothing is published until every group's target is known.
type update struct {
	groups     map[string]*groupState
	order      []string          // group ids in the provider's order
	byInstance map[string]string // provider ID → group id
	nodes      map[string]nodeEntry
	// registeredIDs: an instance is registered when a Node carries its
	// provider ID, whichever group the provider says the Node is in.
	registeredIDs map[string]bool
	// gone: nodes of no group whose instance the cloud no longer has.
	gone  map[string]bool
	total Readiness
}

// collectGroups reads each group's target and instances from the provider.
// A failed instance listing only costs that group its per-instance view
// (upcoming nodes then come from its target alone); a failed target stops
// the update, since every count depends on it.
func (r *Registry) collectGroups() (*update, error) {
	u := &update{groups: map[string]*groupState{}, byInstance: map[string]string{}}
	for _, g := range r.provider.NodeGroups() {
		target, err := g.TargetSize()
		if err != nil {
			return nil, fmt.Errorf("target size of node group %s: %w", g.Id(), err)
		}
		gs := &groupState{NodeGroupState: NodeGroupState{
			Group: g, Target: target, Options: NodeGroupOptions(g, r.opts.NodeGroupDefaults)}}
		gs.instances, gs.nodesErr = g.Nodes()
		if gs.nodesErr != nil {
			klog.InfoS("Cannot list the instances of a node group; counting upcoming nodes from its target only", "nodeGroup", g.Id(), "err", gs.nodesErr)
		}
		gs.deletingIDs = map[string]bool{}
		for _, in := range gs.instances {
			u.byInstance[in.Id] = g.Id()
			if isDeleting(in) {
				gs.deletingIDs[in.Id] = true
			}
		}
		u.groups[g.Id()] = gs
		u.order = append(u.order, g.Id())
	}
	return u, nil
}

func isDeleting(in cloudprovider.Instance) bool {
	return in.Status != nil && in.Status.State == cloudprovider.InstanceDeleting
}

// classifyNodes assigns each node to its group and counts it by readiness,
// in its group and in the cluster total.
func (r *Registry) classifyNodes(u *update, nodes []*apiv1.Node, now time.Time) {
	u.nodes = make(map[string]nodeEntry, len(nodes))
	u.gone = map[string]bool{}
	u.registeredIDs = make(map[string]bool, len(nodes))
	groupErrs := groupLookupErrors{}
	for _, n := range nodes {
		id := r.groupOfNode(n, u.groups, u.byInstance, &groupErrs)
		if n.Spec.ProviderID != "" {
			u.registeredIDs[n.Spec.ProviderID] = true
		}
		kind := r.classify(n, now)
		u.nodes[n.Name] = nodeEntry{group: id, node: n, kind: kind}
		add(&u.total, kind)
		gs := u.groups[id]
		if gs == nil {
			if id == "" && r.instanceGone(n) {
				u.gone[n.Name] = true
			}
			continue
		}
		if kind == kindBeingDeleted && leftTarget(gs, n.Spec.ProviderID) {
			gs.Readiness.BeingDeleted++
			continue
		}
		add(&gs.Readiness, kind)
	}
	groupErrs.log()
}

// leftTarget reports whether a node being deleted is no longer part of its
// group's target: the cloud already dropped its instance, or is deleting
// it. Without an instance list nobody can tell, so it counts as not left.
// Such a node counts as BeingDeleted only, not as Registered.
func leftTarget(gs *groupState, providerID string) bool {
	if gs.nodesErr != nil {
		return false
	}
	return gs.deletingIDs[providerID] || !hasInstance(gs.instances, providerID)
}

// unregState is how long an instance without a Node has been waited for.
type unregState int

const (
	unregWaiting unregState = iota // within the group's provision time
	unregTooLong                   // past the group's provision time
	unregErrored                   // the cloud reports it in error
)

// unregisteredState judges an instance without a Node, first seen at
// since: one the cloud reports in error is not waited for, one past the
// provision time is long unregistered, the others are still coming.
func unregisteredState(in cloudprovider.Instance, since, now time.Time, provision time.Duration) unregState {
	switch {
	case in.Status != nil && in.Status.ErrorInfo != nil:
		return unregErrored
	case now.Sub(since) > provision:
		return unregTooLong
	default:
		return unregWaiting
	}
}

// countUnregistered sorts the instances no Node carries (leaving out those
// the cloud is deleting) by unregisteredState, remembering since when each
// has been waited for, and forgets instances the cloud no longer lists or
// whose Node arrived.
func (r *Registry) countUnregistered(u *update, now time.Time) {
	seen := map[string]bool{}
	for _, id := range u.order {
		gs := u.groups[id]
		for _, in := range gs.instances {
			if isDeleting(in) || u.registeredIDs[in.Id] {
				continue
			}
			key := instanceKey(id, in.Id)
			seen[key] = true
			un := r.unregistered[key]
			if un == nil {
				un = &unregisteredInstance{since: now}
				r.unregistered[key] = un
			}
			switch unregisteredState(in, un.since, now, gs.Options.MaxNodeProvisionTime) {
			case unregErrored:
				gs.errored = append(gs.errored, in)
				gs.Readiness.LongUnregistered++
				u.total.LongUnregistered++
			case unregTooLong:
				gs.longUnreg = append(gs.longUnreg, in)
				gs.Readiness.LongUnregistered++
				u.total.LongUnregistered++
			default:
				gs.unregistered = append(gs.unregistered, in)
				gs.Readiness.Unregistered++
				u.total.Unregistered++
			}
		}
	}
	for key := range r.unregistered {
		if !seen[key] {
			delete(r.unregistered, key)
		}
	}
}

// upcomingNodes returns the nodes of the target that have no Node yet (those
// neither registered in it nor given up as long unregistered) and, with the
// registered ones not started yet, the nodes still coming.
func upcomingNodes(target, inTarget, longUnregistered, notStarted int) (unregistered, upcoming int) {
	unregistered = max(0, target-inTarget-longUnregistered)
	return unregistered, max(0, unregistered+notStarted)
}

// settleGroups derives each group's upcoming nodes and health from its
// counts.
func (r *Registry) settleGroups(u *update, nodes []*apiv1.Node) {
	for _, id := range u.order {
		gs := u.groups[id]
		rd := gs.Readiness
		gs.inTarget = rd.Ready + rd.Unready + rd.NotStarted + beingDeletedInTarget(gs, nodes, u.nodes)
		gs.UpcomingUnregistered, gs.Upcoming = upcomingNodes(gs.Target, gs.inTarget, rd.LongUnregistered, rd.NotStarted)
		gs.Healthy = r.groupHealthy(gs)
	}
}

// publish makes the update the registry's state, then ends the scale-up
// requests it shows complete and drops stale backoffs.
func (r *Registry) publish(u *update, now time.Time) {
	r.groups, r.groupOrder, r.nodes, r.total, r.gone = u.groups, u.order, u.nodes, u.total, u.gone
	r.healthy = r.clusterHealthy()
	r.updateRequests(now)
	r.backoff.Cleanup(now)
}

// groupOfNode returns the id of the node's group, "" for none. The
// provider's NodeGroupForNode decides; when it fails, or names no group of
// this iteration, the group whose instances list the node's provider ID is
// taken, so that a provider error never detaches a running, registered node
// from its group (it would then look like a missing node, and its instance
// like one that never registered).
func (r *Registry) groupOfNode(n *apiv1.Node, groups map[string]*groupState, byInstance map[string]string, errs *groupLookupErrors) string {
	g, err := r.provider.NodeGroupForNode(n)
	if err == nil && g != nil && groups[g.Id()] != nil {
		return g.Id()
	}
	id := ""
	if n.Spec.ProviderID != "" {
		id = byInstance[n.Spec.ProviderID]
	}
	if err != nil {
		errs.add(n.Name, id, err)
	}
	return id
}

// groupLookupErrors gathers NodeGroupForNode failures of one update into one
// log line: a provider outage would otherwise log once per node.
type groupLookupErrors struct {
	count, recovered int
	first            string
}

func (e *groupLookupErrors) add(node, byInstance string, err error) {
	e.count++
	if byInstance != "" {
		e.recovered++
	}
	if e.first == "" {
		e.first = fmt.Sprintf("node %s: %v", node, err)
	}
}

func (e *groupLookupErrors) log() {
	if e.count == 0 {
		return
	}
	klog.InfoS("Cannot tell the node group of nodes; those found by provider ID in a group's instances count in it, the others in no group",
		"nodes", e.count, "first", klog.KRef("", e.first), "foundByProviderID", e.recovered)
}

// beingDeletedInTarget counts the group's tainted nodes the cloud still
// counts in its target.
func beingDeletedInTarget(gs *groupState, nodes []*apiv1.Node, entries map[string]nodeEntry) int {
	if gs.Readiness.BeingDeleted == 0 {
		return 0
	}
	n := 0
	for _, node := range nodes {
		if entries[node.Name].group != gs.Group.Id() || !HasToBeDeletedTaint(node) {
			continue
		}
		if gs.nodesErr != nil || (!gs.deletingIDs[node.Spec.ProviderID] && hasInstance(gs.instances, node.Spec.ProviderID)) {
			n++
		}
	}
	return n
}

func hasInstance(ins []cloudprovider.Instance, id string) bool {
	return slices.ContainsFunc(ins, func(in cloudprovider.Instance) bool { return in.Id == id })
}

type nodeKind int

const (
	kindReady nodeKind = iota
	kindUnready
	kindNotStarted
	kindBeingDeleted
	// kindResourceUnready: Ready without its GPU, past MaxNodeStartupTime.
	kindResourceUnready
)

// IsReady is the one rule for a node ready to run pods, which every phase
// uses: Ready, not being deleted, no startup taint left (--startup-taint,
// --startup-taint-prefix and the ignore-taint prefix; status taints do
// not count, as upstream), and its GPUs or devices advertised.
// A node object the last update classified is not classified again (a
// pass over every node, e.g. consolidation's candidacy, costs a lookup).
func (r *Registry) IsReady(n *apiv1.Node) bool {
	if e, ok := r.nodes[n.Name]; ok && e.node == n {
		return e.kind == kindReady
	}
	// The time tells a node not started from an unready one, never a
	// ready one.
	return r.classify(n, time.Time{}) == kindReady
}

// nodeEntry is a node as the last update found it: its group ("" for
// nodes no group owns) and its readiness.
type nodeEntry struct {
	group string
	node  *apiv1.Node
	kind  nodeKind
}

// classify sorts a node by readiness (NodeReadiness). A Ready node still
// holding a startup taint, or a GPU node whose GPU is not advertised yet, is
// not ready: pods cannot use it yet, and counting it as not started, hence
// upcoming, keeps the pods waiting for it from causing another scale-up.
func (r *Registry) classify(n *apiv1.Node, now time.Time) nodeKind {
	if HasToBeDeletedTaint(n) {
		return kindBeingDeleted
	}
	ready, _ := NodeReadiness(n)
	resourceUnready := ready && ResourceUnready(n, r.gpuLabel, r.publishesDevices != nil && r.publishesDevices(n.Name))
	switch {
	case ready && !resourceUnready && !r.taints.HasStartupTaint(n):
		return kindReady
	case now.Sub(n.CreationTimestamp.Time) < MaxNodeStartupTime:
		return kindNotStarted
	case resourceUnready:
		return kindResourceUnready
	default:
		return kindUnready
	}
}

func add(r *Readiness, k nodeKind) {
	r.Registered++
	switch k {
	case kindReady:
		r.Ready++
	case kindUnready:
		r.Unready++
	case kindResourceUnready:
		r.Unready++
		r.ResourceUnready++
	case kindNotStarted:
		r.NotStarted++
	case kindBeingDeleted:
		r.BeingDeleted++
	}
}

// tooManyUnready applies --ok-total-unready-count and
// --max-total-unready-percentage.
func (r *Registry) tooManyUnready(unready, total int) bool {
	return unready > r.opts.OkTotalUnreadyCount &&
		float64(unready) > r.opts.MaxTotalUnreadyPercentage/100*float64(total)
}

// clusterHealthy, as upstream: registered nodes that are unready, against
// all registered nodes. Instances that never registered, or failed, do not
// count: they are given up and deleted, but a cloud that refuses to delete
// them, or keeps listing them, must not stop the autoscaler for good.
func (r *Registry) clusterHealthy() bool {
	return !r.tooManyUnready(r.total.Unready, r.total.Registered)
}

// groupHealthy, as upstream: the group's ready nodes fall short of what its
// target promises, leaving out the nodes a scale-up in progress still owes
// and instances given up as never registering, by too many.
func (r *Registry) groupHealthy(gs *groupState) bool {
	rd := gs.Readiness
	expected := gs.Target - len(gs.longUnreg)
	if req := r.requests[gs.Group.Id()]; req != nil {
		expected -= req.Increase
	}
	return !r.tooManyUnready(max(0, expected-rd.Ready), rd.Ready+rd.Unready+rd.NotStarted)
}

// updateRequests ends scale-up requests whose nodes all registered (clearing
// the group's backoff if nothing failed) and drops those of vanished groups.
// Instances in error or unregistered too long, not yet given up, keep the
// request open: FixNodeGroupSizes gives them up against it, and backs the
// group off.
func (r *Registry) updateRequests(now time.Time) {
	for id, req := range r.requests {
		gs := r.groups[id]
		if gs == nil {
			delete(r.requests, id)
			continue
		}
		if gs.UpcomingUnregistered == 0 && len(r.notGivenUp(id, gs.errored)) == 0 && len(r.notGivenUp(id, gs.longUnreg)) == 0 {
			klog.V(2).InfoS("Scale-up completed", "nodeGroup", id, "increase", req.Increase, "after", now.Sub(req.Time).Round(time.Second))
			delete(r.requests, id)
			if !req.failed {
				r.backoff.Remove(id)
			}
		}
	}
}

// notGivenUp returns the instances of a group not given up yet.
func (r *Registry) notGivenUp(groupID string, ins []cloudprovider.Instance) []cloudprovider.Instance {
	var out []cloudprovider.Instance
	for _, in := range ins {
		if u := r.unregistered[instanceKey(groupID, in.Id)]; u != nil && u.gaveUp.IsZero() {
			out = append(out, in)
		}
	}
	return out
}

// IsClusterHealthy reports whether few enough nodes are unready to scale.
func (r *Registry) IsClusterHealthy() bool {
	return r.healthy
}

// TotalReadiness returns the cluster-wide counts.
func (r *Registry) TotalReadiness() Readiness {
	return r.total
}

// NodeGroups returns the groups' states in the provider's order.
func (r *Registry) NodeGroups() []NodeGroupState {
	out := make([]NodeGroupState, 0, len(r.groupOrder))
	for _, id := range r.groupOrder {
		out = append(out, r.groups[id].NodeGroupState)
	}
	return out
}

// NodeGroup returns one group's state.
func (r *Registry) NodeGroup(id string) (NodeGroupState, bool) {
	gs := r.groups[id]
	if gs == nil {
		return NodeGroupState{}, false
	}
	return gs.NodeGroupState, true
}

// NodeGroupIDForNode returns the id of the node's group, "" if none.
func (r *Registry) NodeGroupIDForNode(nodeName string) string {
	return r.nodes[nodeName].group
}

// instanceGone reports whether the cloud says it no longer has the node's
// instance: deleted, by this autoscaler or anyone, while its Node object
// lingers (it stays Ready until the node controller notices the kubelet
// is gone). An error (the provider cannot tell) is not gone.
func (r *Registry) instanceGone(n *apiv1.Node) bool {
	has, err := r.provider.HasInstance(n)
	return err == nil && !has
}

// Gone returns the nodes whose instance the cloud no longer has, as of the
// last update: no phase places a pod on them or counts them (upstream's
// deleted nodes).
func (r *Registry) Gone() map[string]bool { return r.gone }

// InTarget reports whether the cloud still counts the node in its group's
// target as of the last update: true until its instance is deleting or gone
// (and when the instance list is unknown). A node whose removal started may
// still be in the target, and come back if the removal fails, so it counts
// against the maxima until this says otherwise. Nodes of no group: false.
func (r *Registry) InTarget(n *apiv1.Node) bool {
	gs := r.groups[r.nodes[n.Name].group]
	return gs != nil && !leftTarget(gs, n.Spec.ProviderID)
}

// BackedOff reports whether the group is backed off at now, and why: its
// own failures, or an account-wide limit that holds every group.
func (r *Registry) BackedOff(id string, now time.Time) (bool, BackoffInfo, time.Time) {
	if off, info, until := r.backoff.BackedOff(accountBackoffKey, now); off {
		return off, info, until
	}
	return r.backoff.BackedOff(id, now)
}

// accountBackoffKey keys, in the backoff, the account-wide limit that holds
// every node group; no group ID is empty.
const accountBackoffKey = ""

// RegisterScaleUp records that the group's target was raised by delta.
func (r *Registry) RegisterScaleUp(g cloudprovider.NodeGroup, delta int, now time.Time) {
	id := g.Id()
	provision := r.opts.NodeGroupDefaults.MaxNodeProvisionTime
	if gs := r.groups[id]; gs != nil {
		provision = gs.Options.MaxNodeProvisionTime
		gs.Target += delta
		gs.Upcoming += delta
		gs.UpcomingUnregistered += delta
	}
	req := r.requests[id]
	if req == nil {
		req = &ScaleUpRequest{GroupID: id, Time: now}
		r.requests[id] = req
	}
	req.Increase += delta
	// A further increase gets the full provision time too.
	req.ExpectedAddTime = now.Add(provision)
	delete(r.sizeMismatchSince, id)
}

// RegisterFailedScaleUp records a failed scale-up of the group (the cloud
// refused it, or its nodes did not come) and backs the group off.
func (r *Registry) RegisterFailedScaleUp(g cloudprovider.NodeGroup, reason string, info BackoffInfo, now time.Time) {
	r.backOff(g.Id(), reason, info, now)
}

// RegisterAccountLimit records a scale-up the cloud refused at an
// account-wide limit: every node group, those the provider lists later too,
// is backed off (the pause doubling as a group's does), since each would get
// the same answer. It returns when the backoff ends.
func (r *Registry) RegisterAccountLimit(reason string, info BackoffInfo, now time.Time) time.Time {
	until := r.backoff.Backoff(accountBackoffKey, info, now)
	klog.InfoS("Scale-up of every node group backed off", "until", until.Format(time.RFC3339), "reason", reason, "error", info.ErrorMessage)
	return until
}

// backOff backs the group off; reason is for the log line.
func (r *Registry) backOff(id, reason string, info BackoffInfo, now time.Time) {
	until := r.backoff.Backoff(id, info, now)
	if req := r.requests[id]; req != nil {
		req.failed = true
	}
	// The error's message was logged where it was met (the scale-up that
	// failed, the give-up of instances in error): only its code is repeated.
	klog.InfoS("Node group backed off", "nodeGroup", id, "until", until.Format(time.RFC3339), "reason", reason, "errorCode", info.ErrorCode)
}

// SetConsolidation sets the status ConfigMap's consolidation section.
func (r *Registry) SetConsolidation(st *api.ConsolidationStatus) {
	r.consolidation = st
}

// SetLimits sets the status ConfigMap's limits section (nil: none).
func (r *Registry) SetLimits(st *api.LimitsStatus) {
	r.limits = st
}

// SetMessage sets the status ConfigMap's message ("" for none).
func (r *Registry) SetMessage(msg string) {
	r.message = msg
}

// SetScaleDownCandidates records the unneeded nodes per group, for status.
func (r *Registry) SetScaleDownCandidates(byGroup map[string]int) {
	r.candidates = maps.Clone(byGroup)
}

// setCondition returns the transition time of key's status, moving it to
// now when the status changed.
func (r *Registry) setCondition(key, status string, now time.Time) time.Time {
	c, ok := r.conditions[key]
	if !ok || c.status != status {
		c = condition{status: status, since: now}
		r.conditions[key] = c
	}
	return c.since
}

// sortedGroupIDs is used by status so the ConfigMap does not reorder
// between writes when the provider lists groups in a different order.
func (r *Registry) sortedGroupIDs() []string {
	return slices.Sorted(slices.Values(r.groupOrder))
}
