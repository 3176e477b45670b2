// Package test is an in-memory implementation of the provider contract for the
// core's table tests and benchmarks. It records every mutating call so tests
// can assert exactly what the autoscaler asked the cloud to do, and lets a
// test inject failures per method.
package test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Call is one recorded provider call.
type Call struct {
	Method string   // IncreaseSize, AtomicIncreaseSize, DecreaseTargetSize, DeleteNodes, ForceDeleteNodes, Delete, Refresh, Cleanup
	Group  string   // node group id ("" for provider-wide calls)
	Delta  int      // for size changes
	Nodes  []string // node names, for deletions
}

// Provider is the in-memory cloud. All methods are safe for concurrent use
// (the scale-down actuator deletes nodes from a goroutine).
type Provider struct {
	mu      sync.Mutex
	groups  []*NodeGroup
	calls   []Call
	limiter *cloudprovider.ResourceLimiter
	pricing cloudprovider.PricingModel
	// byID indexes instances by provider ID so NodeGroupForNode stays O(1)
	// in benchmarks with thousands of nodes.
	byID map[string]*NodeGroup
	// deleted: provider IDs of the instances groups deleted.
	deleted map[string]bool
	gpuCfg  map[string]*cloudprovider.GpuConfig // by node name
	errs    map[string]error                    // method → injected error (provider-wide)
	seq     int
	// problems are what Problems reports (cloudprovider.ProblemReporter).
	problems []string
	// machines are the machine types new groups may be made of (AddMachineType).
	machines []machineType
	// outOfStock are the machine types whose creation is refused for
	// capacity (OutOfStock); unavailable those refused so far, no longer
	// listed by GetAvailableMachineTypes.
	outOfStock, unavailable map[string]bool
	// creates: planned groups may be created (AllowCreation).
	creates bool
	// creationStopped, when set, is why node group creation is stopped
	// (StopCreation).
	creationStopped string
	// byPreference: the machine types are listed in preference order.
	byPreference bool
}

// SetProblems sets what Problems reports from now on.
func (p *Provider) SetProblems(problems ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = slices.Clone(problems)
}

// Problems implements cloudprovider.ProblemReporter.
func (p *Provider) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.problems)
}

// NewProvider returns an empty provider with no resource limits.
func NewProvider() *Provider {
	return &Provider{errs: map[string]error{}, gpuCfg: map[string]*cloudprovider.GpuConfig{}, byID: map[string]*NodeGroup{}, deleted: map[string]bool{}}
}

// NodeGroup is an in-memory node group.
type NodeGroup struct {
	p         *Provider
	id        string
	min, max  int
	target    int
	template  *framework.NodeInfo
	instances []cloudprovider.Instance
	options   *config.NodeGroupAutoscalingOptions
	errs      map[string]error // method → injected error
	// ProvisionNodes, when set, makes IncreaseSize add instances in state
	// Creating (as DOKS does); otherwise only the target moves.
	provision bool
	// deleteLimit, when set, is how many nodes DeleteNodes deletes before
	// it fails.
	deleteLimit *int
	// goesWithLastNodes: autoprovisioned, and deleted in place of its last
	// nodes (see GoesWithLastNodes); gone once that happened.
	goesWithLastNodes, gone bool
	// maxHourlyCost: the group's own hourly limit (0: none).
	maxHourlyCost float64
	// neverCame counts NodesNeverCame calls.
	neverCame int
	// unavailable: why the group's machine type cannot be had now.
	unavailable string
}

// SetUnavailable makes the group say its machine type cannot be had now
// (cloudprovider.AvailabilityReporter); "" makes it available.
func (g *NodeGroup) SetUnavailable(why string) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.unavailable = why
}

// Unavailable implements cloudprovider.AvailabilityReporter.
func (g *NodeGroup) Unavailable() string {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.unavailable
}

// NodesNeverCame implements cloudprovider.ProvisionTimeoutLearner; it is
// counted (NeverCame), not recorded among the calls.
func (g *NodeGroup) NodesNeverCame() {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.neverCame++
}

// NeverCame is how many times the core said the group's nodes never came.
func (g *NodeGroup) NeverCame() int {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.neverCame
}

// SetMaxHourlyCost sets the group's own hourly cost limit in USD
// (cloudprovider.HourlyCostLimiter); 0 means none.
func (g *NodeGroup) SetMaxHourlyCost(usd float64) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.maxHourlyCost = usd
}

// MaxHourlyCost implements cloudprovider.HourlyCostLimiter.
func (g *NodeGroup) MaxHourlyCost() float64 {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.maxHourlyCost
}

// GoesWithLastNodes makes the group an autoprovisioned one that the cloud
// deletes in place of its last nodes, as the DigitalOcean provider deletes
// a pool it created: a DeleteNodes that takes every instance left deletes
// the group (Exist false, target 0), and Delete then drops it from
// NodeGroups.
func (g *NodeGroup) GoesWithLastNodes() {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.goesWithLastNodes = true
}

// AddNodeGroup adds a group with the given bounds, current target and
// template (nil: TemplateNodeInfo returns ErrNotImplemented).
func (p *Provider) AddNodeGroup(id string, minSize, maxSize, target int, template *framework.NodeInfo) *NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := &NodeGroup{p: p, id: id, min: minSize, max: maxSize, target: target, template: template,
		errs: map[string]error{}, provision: true}
	p.groups = append(p.groups, g)
	return g
}

// AddNode registers an existing node as a running instance of group id.
// The node's spec.providerID is set to "test://<name>" when empty.
func (p *Provider) AddNode(groupID string, node *apiv1.Node) {
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = "test://" + node.Name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.groupLocked(groupID)
	if g == nil {
		panic("test provider: unknown group " + groupID)
	}
	g.instances = append(g.instances, cloudprovider.Instance{Id: node.Spec.ProviderID,
		Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
	p.byID[node.Spec.ProviderID] = g
}

// SetResourceLimiter sets what GetResourceLimiter returns.
func (p *Provider) SetResourceLimiter(l *cloudprovider.ResourceLimiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limiter = l
}

// SetPricing sets the pricing model (nil: Pricing returns ErrNotImplemented).
func (p *Provider) SetPricing(m cloudprovider.PricingModel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pricing = m
}

// SetGpuConfig marks a node as a GPU node.
func (p *Provider) SetGpuConfig(nodeName string, cfg *cloudprovider.GpuConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpuCfg[nodeName] = cfg
}

// InjectError makes the provider-wide method (Refresh, NodeGroupForNode,
// Cleanup, GetResourceLimiter) return err; nil clears it.
func (p *Provider) InjectError(method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.errs, method)
		return
	}
	p.errs[method] = err
}

// Calls returns the recorded mutating calls, in order.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// CallsOf returns the recorded calls of one method.
func (p *Provider) CallsOf(method string) []Call {
	var out []Call
	for _, c := range p.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (p *Provider) ResetCalls() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
}

// Group returns the group with the given id, or nil.
func (p *Provider) Group(id string) *NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groupLocked(id)
}

func (p *Provider) groupLocked(id string) *NodeGroup {
	for _, g := range p.groups {
		if g.id == id {
			return g
		}
	}
	return nil
}

func (p *Provider) record(c Call) { p.calls = append(p.calls, c) }

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return "test" }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, 0, len(p.groups))
	for _, g := range p.groups {
		out = append(out, g)
	}
	return out
}

// NodeGroupForNode implements cloudprovider.CloudProvider: a node belongs to
// the group that lists an instance with its provider ID.
func (p *Provider) NodeGroupForNode(node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.errs["NodeGroupForNode"]; err != nil {
		return nil, err
	}
	if g := p.byID[node.Spec.ProviderID]; g != nil {
		return g, nil
	}
	return nil, nil
}

// HasInstance implements cloudprovider.CloudProvider: like a cloud, it has
// every instance it did not delete (a node of no group is one the tests
// made outside any group) and none it deleted.
func (p *Provider) HasInstance(node *apiv1.Node) (bool, error) {
	g, err := p.NodeGroupForNode(node)
	if err != nil || g != nil {
		return g != nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.deleted[node.Spec.ProviderID], nil
}

// Pricing implements cloudprovider.CloudProvider.
func (p *Provider) Pricing() (cloudprovider.PricingModel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pricing == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return p.pricing, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.errs["GetResourceLimiter"]; err != nil {
		return nil, err
	}
	return p.limiter, nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string { return "test.gpu/type" }

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes() map[string]struct{} { return nil }

// GetNodeGpuConfig implements cloudprovider.CloudProvider.
func (p *Provider) GetNodeGpuConfig(node *apiv1.Node) *cloudprovider.GpuConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gpuCfg[node.Name]
}

// Cleanup implements cloudprovider.CloudProvider.
func (p *Provider) Cleanup() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(Call{Method: "Cleanup"})
	return p.errs["Cleanup"]
}

// Refresh implements cloudprovider.CloudProvider.
func (p *Provider) Refresh() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(Call{Method: "Refresh"})
	return p.errs["Refresh"]
}

// --- node group ---

// SetOptions sets what GetOptions returns (nil: ErrNotImplemented).
func (g *NodeGroup) SetOptions(o *config.NodeGroupAutoscalingOptions) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.options = o
}

// SetProvisionInstances chooses whether IncreaseSize adds Creating instances.
func (g *NodeGroup) SetProvisionInstances(on bool) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.provision = on
}

// InjectError makes a group method (IncreaseSize, DeleteNodes,
// DecreaseTargetSize, Nodes, TemplateNodeInfo, TargetSize) fail; nil clears.
func (g *NodeGroup) InjectError(method string, err error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err == nil {
		delete(g.errs, method)
		return
	}
	g.errs[method] = err
}

// FailDeletesAfter makes DeleteNodes delete the first n nodes of a call and
// then fail, as a cloud API that fails part-way through a batch; a negative
// n clears it.
func (g *NodeGroup) FailDeletesAfter(n int) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if n < 0 {
		g.deleteLimit = nil
		return
	}
	g.deleteLimit = &n
}

// SetInstanceError puts the instance with the given id in error, as a cloud
// does when it fails to create a machine.
func (g *NodeGroup) SetInstanceError(id string, info *cloudprovider.InstanceErrorInfo) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	for i := range g.instances {
		if g.instances[i].Id == id {
			g.instances[i].Status = &cloudprovider.InstanceStatus{ErrorInfo: info}
		}
	}
}

// SetTemplate replaces the group's template (nil: TemplateNodeInfo returns
// ErrNotImplemented).
func (g *NodeGroup) SetTemplate(t *framework.NodeInfo) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.template = t
}

// SetTargetSize moves the target without recording a call (test setup).
func (g *NodeGroup) SetTargetSize(n int) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.target = n
}

// MaxSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// MinSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// TargetSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) TargetSize() (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err := g.errs["TargetSize"]; err != nil {
		return 0, err
	}
	return g.target, nil
}

// IncreaseSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) IncreaseSize(delta int) error { return g.increase("IncreaseSize", delta) }

// AtomicIncreaseSize implements cloudprovider.NodeGroup.
func (g *NodeGroup) AtomicIncreaseSize(delta int) error {
	return g.increase("AtomicIncreaseSize", delta)
}

func (g *NodeGroup) increase(method string, delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.p.record(Call{Method: method, Group: g.id, Delta: delta})
	if err := g.errs[method]; err != nil {
		return err
	}
	if delta <= 0 {
		return fmt.Errorf("size increase must be positive, got %d", delta)
	}
	if g.target+delta > g.max {
		return fmt.Errorf("size increase too large: target %d + %d > max %d", g.target, delta, g.max)
	}
	g.target += delta
	if g.provision {
		for i := 0; i < delta; i++ {
			g.p.seq++
			id := fmt.Sprintf("test://%s-new-%d", g.id, g.p.seq)
			g.instances = append(g.instances, cloudprovider.Instance{
				Id:     id,
				Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}})
			g.p.byID[id] = g
		}
	}
	return nil
}

// DeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) DeleteNodes(nodes []*apiv1.Node) error { return g.del("DeleteNodes", nodes, true) }

// ForceDeleteNodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) ForceDeleteNodes(nodes []*apiv1.Node) error {
	return g.del("ForceDeleteNodes", nodes, false)
}

func (g *NodeGroup) del(method string, nodes []*apiv1.Node, respectMin bool) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	g.p.record(Call{Method: method, Group: g.id, Nodes: names})
	if err := g.errs[method]; err != nil {
		return err
	}
	if g.gone {
		return fmt.Errorf("node group %s was deleted", g.id)
	}
	if respectMin && g.target-len(nodes) < g.min {
		return fmt.Errorf("cannot delete %d nodes: target %d would go below min %d", len(nodes), g.target, g.min)
	}
	if g.goesWithLastNodes && g.target == len(nodes) {
		defer func() { g.gone = g.target == 0 }()
	}
	for k, n := range nodes {
		if g.deleteLimit != nil && k == *g.deleteLimit {
			return fmt.Errorf("deleting node %s (%d of %d): injected failure", n.Name, k+1, len(nodes))
		}
		idx := -1
		for i, in := range g.instances {
			if in.Id == n.Spec.ProviderID {
				idx = i
			}
		}
		if idx < 0 {
			return fmt.Errorf("node %s (%s) does not belong to group %s", n.Name, n.Spec.ProviderID, g.id)
		}
		delete(g.p.byID, g.instances[idx].Id)
		g.p.deleted[g.instances[idx].Id] = true
		g.instances = append(g.instances[:idx], g.instances[idx+1:]...)
		g.target--
	}
	return nil
}

// DecreaseTargetSize implements cloudprovider.NodeGroup. Like a cloud, it
// drops instances that are still being created, newest first.
func (g *NodeGroup) DecreaseTargetSize(delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.p.record(Call{Method: "DecreaseTargetSize", Group: g.id, Delta: delta})
	if err := g.errs["DecreaseTargetSize"]; err != nil {
		return err
	}
	if delta >= 0 {
		return fmt.Errorf("size decrease must be negative, got %d", delta)
	}
	if g.target+delta < 0 {
		return fmt.Errorf("cannot decrease target %d by %d", g.target, -delta)
	}
	g.target += delta
	drop := -delta
	for i := len(g.instances) - 1; i >= 0 && drop > 0; i-- {
		st := g.instances[i].Status
		if st != nil && st.State == cloudprovider.InstanceCreating {
			delete(g.p.byID, g.instances[i].Id)
			g.p.deleted[g.instances[i].Id] = true
			g.instances = append(g.instances[:i], g.instances[i+1:]...)
			drop--
		}
	}
	return nil
}

// Id implements cloudprovider.NodeGroup.
func (g *NodeGroup) Id() string { return g.id }

// Debug implements cloudprovider.NodeGroup.
func (g *NodeGroup) Debug() string {
	return fmt.Sprintf("%s (min:%d max:%d)", g.id, g.min, g.max)
}

// Nodes implements cloudprovider.NodeGroup.
func (g *NodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err := g.errs["Nodes"]; err != nil {
		return nil, err
	}
	out := make([]cloudprovider.Instance, len(g.instances))
	for i, in := range g.instances {
		out[i] = in
		if in.Status != nil {
			st := *in.Status
			out[i].Status = &st
		}
	}
	return out, nil
}

// TemplateNodeInfo implements cloudprovider.NodeGroup: a deep copy of the
// template given at creation, with a fresh node name each call.
func (g *NodeGroup) TemplateNodeInfo() (*framework.NodeInfo, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err := g.errs["TemplateNodeInfo"]; err != nil {
		return nil, err
	}
	if g.template == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return g.template.DeepCopy(), nil
}

// Exist implements cloudprovider.NodeGroup.
func (g *NodeGroup) Exist() bool {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return !g.gone
}

// Create implements cloudprovider.NodeGroup.
func (g *NodeGroup) Create() (cloudprovider.NodeGroup, error) {
	return nil, cloudprovider.ErrAlreadyExist
}

// Delete implements cloudprovider.NodeGroup: only a group GoesWithLastNodes
// deleted can be, which drops it from NodeGroups.
func (g *NodeGroup) Delete() error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.p.record(Call{Method: "Delete", Group: g.id})
	if !g.gone {
		return cloudprovider.ErrNotImplemented
	}
	g.p.groups = slices.DeleteFunc(g.p.groups, func(o *NodeGroup) bool { return o == g })
	return nil
}

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *NodeGroup) Autoprovisioned() bool {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.goesWithLastNodes
}

// GetOptions implements cloudprovider.NodeGroup.
func (g *NodeGroup) GetOptions(defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if g.options == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	o := *g.options
	return &o, nil
}

// InstanceIDs lists the group's instance ids in a stable order (test helper).
func (g *NodeGroup) InstanceIDs() []string {
	ins, _ := g.Nodes()
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.Id)
	}
	sort.Strings(out)
	return out
}

// PricingModel is a simple pricing model: nodes cost per core-hour and per
// GiB-hour of capacity unless a per-node price is set; pods by requests.
type PricingModel struct {
	NodePrices     map[string]float64 // node name prefix → price per hour
	PerCoreHour    float64
	PerGiBHour     float64
	PodPerCoreHour float64
	PodPerGiBHour  float64
}

// NodePrice implements cloudprovider.PricingModel.
func (m *PricingModel) NodePrice(node *apiv1.Node, start, end time.Time) (float64, error) {
	hours := end.Sub(start).Hours()
	best := ""
	for prefix := range m.NodePrices {
		if len(prefix) > len(best) && len(node.Name) >= len(prefix) && node.Name[:len(prefix)] == prefix {
			best = prefix
		}
	}
	if best != "" {
		return m.NodePrices[best] * hours, nil
	}
	cpu := node.Status.Capacity.Cpu().MilliValue()
	mem := node.Status.Capacity.Memory().Value()
	return (float64(cpu)/1000*m.PerCoreHour + float64(mem)/float64(config.GiB)*m.PerGiBHour) * hours, nil
}

// PodPrice implements cloudprovider.PricingModel.
func (m *PricingModel) PodPrice(pod *apiv1.Pod, start, end time.Time) (float64, error) {
	hours := end.Sub(start).Hours()
	req := framework.PodRequests(pod)
	cpu, mem := req.Cpu().MilliValue(), req.Memory().Value()
	return (float64(cpu)/1000*m.PodPerCoreHour + float64(mem)/float64(config.GiB)*m.PodPerGiBHour) * hours, nil
}
