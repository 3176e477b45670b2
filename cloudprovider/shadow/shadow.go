// Package shadow wraps a cloud provider for shadow mode (--shadow): every
// read goes to the real provider, every write (IncreaseSize,
// AtomicIncreaseSize, DecreaseTargetSize, DeleteNodes, ForceDeleteNodes,
// node group Create, CreateWithSize and Delete) is checked as the provider
// would check its arguments, recorded, logged and not sent.
//
// What the core sees after a would-be write is what the write would have
// made, for a while (the hold), so that one decision is not taken again at
// every loop:
//   - a would-be resize shows in TargetSize until the real target moves
//     away from the one the resize started from, or the hold ends. The
//     hold of a resize is at most half the group's
//     --max-node-provision-time, so the core never gives up on the nodes
//     it asked for (they never come) and never backs the group off;
//     afterwards the target is the real one again and, if the pods still
//     wait, the same scale-up is decided (and recorded) once more.
//   - a would-be node removal hides the node's instance: it is in no node
//     group (NodeGroupForNode returns nil, Nodes leaves it out) and its
//     group's target counts it out, until a real listing shows the
//     instance gone or being deleted, or the hold ends. The Node and its
//     pods stay in the cluster: later decisions still count them.
//   - a would-be node group creation lists the planned group as an
//     existing one with the would-be target and no instances; a would-be
//     deletion leaves the group out of NodeGroups; both for the hold.
//
// The optional interfaces the core looks for (cloudprovider.ProblemReporter,
// DeletingInstancesReporter, DRAAware, InstanceQuotaReporter; a group's
// SizedCreator and HourlyCostLimiter) are implemented here and answered by the real provider
// or group when it implements them: a new optional interface of the
// contract must be added here too, or shadow mode would hide it.
//
// Shadow mode cannot show what only the cloud knows: how long droplets take
// to boot or go, whether DigitalOcean would accept a size change (quota,
// droplet limit, region capacity), or what the nodes it would add would
// let the scheduler do next.
package shadow

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Operations a Write names.
const (
	OpIncreaseSize       = "increase_size"
	OpDecreaseTargetSize = "decrease_target_size"
	OpDeleteNodes        = "delete_nodes"
	OpCreateNodeGroup    = "create_node_group"
	OpDeleteNodeGroup    = "delete_node_group"
)

// DefaultHold is how long a would-be change is shown when Options.Hold is
// zero.
const DefaultHold = 5 * time.Minute

// Write is one write the provider did not send.
type Write struct {
	Op    string
	Group string
	// Delta is the size change asked for (IncreaseSize, DecreaseTargetSize,
	// the count of a created group); the number of nodes for DeleteNodes.
	Delta int
	// Nodes are the names of the nodes DeleteNodes was given.
	Nodes []string
}

// Options tune the wrapper.
type Options struct {
	// Hold bounds how long a would-be change is shown (DefaultHold when 0).
	Hold time.Duration
	// Defaults are the node group defaults (--max-node-provision-time),
	// read with each group's own options to bound the hold of a resize.
	Defaults config.NodeGroupAutoscalingOptions
	// OnWrite, when set, hears every write not sent (metrics).
	OnWrite func(Write)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Provider is a cloudprovider.CloudProvider that sends no write.
type Provider struct {
	inner cloudprovider.CloudProvider
	opts  Options

	mu sync.Mutex
	// resized: the would-be target change of each group, by group ID.
	resized map[string]*resize
	// removed: the instances of would-be removed nodes, by provider ID.
	removed map[string]*removal
	// created: the would-be created groups, by group ID.
	created map[string]*createdGroup
	// deleted: the would-be deleted groups, by group ID, until when.
	deleted map[string]time.Time
}

type resize struct {
	base  int // the real target when the change was asked
	delta int
	until time.Time
}

type removal struct {
	group string
	node  string
	until time.Time
}

type createdGroup struct {
	planned cloudprovider.NodeGroup
	target  int
	until   time.Time
}

// New wraps inner.
func New(inner cloudprovider.CloudProvider, opts Options) *Provider {
	if opts.Hold <= 0 {
		opts.Hold = DefaultHold
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{inner: inner, opts: opts, resized: map[string]*resize{}, removed: map[string]*removal{},
		created: map[string]*createdGroup{}, deleted: map[string]time.Time{}}
}

// Inner is the wrapped provider.
func (p *Provider) Inner() cloudprovider.CloudProvider { return p.inner }

var (
	_ cloudprovider.CloudProvider             = (*Provider)(nil)
	_ cloudprovider.ProblemReporter           = (*Provider)(nil)
	_ cloudprovider.DeletingInstancesReporter = (*Provider)(nil)
	_ cloudprovider.DRAAware                  = (*Provider)(nil)
	_ cloudprovider.SizedCreator              = (*group)(nil)
	_ cloudprovider.HourlyCostLimiter         = (*group)(nil)
)

func (p *Provider) record(w Write) {
	klog.InfoS("Shadow mode: not sending a cloud provider write", "operation", w.Op, "nodeGroup", w.Group, "delta", w.Delta, "nodes", w.Nodes)
	if p.opts.OnWrite != nil {
		p.opts.OnWrite(w)
	}
}

// Name is the real provider's.
func (p *Provider) Name() string { return p.inner.Name() }

// NodeGroups are the real groups, less those deleted and with those
// created in shadow.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	real := p.inner.NodeGroups()
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, 0, len(real)+len(p.created))
	seen := map[string]bool{}
	for _, g := range real {
		seen[g.Id()] = true
		if until, ok := p.deleted[g.Id()]; ok && now.Before(until) {
			continue
		}
		out = append(out, &group{p: p, inner: g})
	}
	for id, c := range p.created {
		if !seen[id] && now.Before(c.until) {
			out = append(out, &group{p: p, inner: c.planned, created: true})
		}
	}
	return out
}

// NodeGroupForNode is the real provider's answer, but nil for a node
// removed in shadow.
func (p *Provider) NodeGroupForNode(n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	if n != nil && p.hidden(n.Spec.ProviderID) {
		return nil, nil
	}
	g, err := p.inner.NodeGroupForNode(n)
	if err != nil || g == nil {
		return nil, err
	}
	return &group{p: p, inner: g}, nil
}

// hidden reports whether the instance was removed in shadow and is still
// shown as gone.
func (p *Provider) hidden(providerID string) bool {
	if providerID == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.removed[providerID]
	return ok && p.opts.Now().Before(r.until)
}

// HasInstance is the real provider's answer: the droplet is still there.
func (p *Provider) HasInstance(n *apiv1.Node) (bool, error) { return p.inner.HasInstance(n) }

// Pricing is the real provider's.
func (p *Provider) Pricing() (cloudprovider.PricingModel, error) { return p.inner.Pricing() }

// MachineTypesByPreference is the real provider's (MachineTypeOrderer).
func (p *Provider) MachineTypesByPreference() bool {
	o, ok := p.inner.(cloudprovider.MachineTypeOrderer)
	return ok && o.MachineTypesByPreference()
}

// GetAvailableMachineTypes is the real provider's.
func (p *Provider) GetAvailableMachineTypes() ([]string, error) {
	return p.inner.GetAvailableMachineTypes()
}

// NewNodeGroup is the real provider's planned group, wrapped.
func (p *Provider) NewNodeGroup(machineType string, labels map[string]string, systemLabels map[string]string,
	taints []apiv1.Taint, extraResources map[string]resource.Quantity) (cloudprovider.NodeGroup, error) {
	g, err := p.inner.NewNodeGroup(machineType, labels, systemLabels, taints, extraResources)
	if err != nil || g == nil {
		return nil, err
	}
	return &group{p: p, inner: g}, nil
}

// GetResourceLimiter is the real provider's.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return p.inner.GetResourceLimiter()
}

// GPULabel is the real provider's.
func (p *Provider) GPULabel() string { return p.inner.GPULabel() }

// GetAvailableGPUTypes is the real provider's.
func (p *Provider) GetAvailableGPUTypes() map[string]struct{} { return p.inner.GetAvailableGPUTypes() }

// GetNodeGpuConfig is the real provider's.
func (p *Provider) GetNodeGpuConfig(n *apiv1.Node) *cloudprovider.GpuConfig {
	return p.inner.GetNodeGpuConfig(n)
}

// Cleanup is the real provider's (it ends calls; it changes nothing in
// the cloud).
func (p *Provider) Cleanup() error { return p.inner.Cleanup() }

// Refresh refreshes the real provider, then forgets the would-be changes
// whose hold ended or that a real listing overtook: a removed instance the
// cloud no longer lists (or is deleting), a resize of a group whose real
// target moved, anything of a group that is gone.
func (p *Provider) Refresh() error {
	if err := p.inner.Refresh(); err != nil {
		return err
	}
	now := p.opts.Now()
	// The real groups' targets and live instances, read outside the lock.
	targets := map[string]int{}
	live := map[string]map[string]bool{} // group → provider IDs listed and not being deleted
	for _, g := range p.inner.NodeGroups() {
		if t, err := g.TargetSize(); err == nil {
			targets[g.Id()] = t
		}
		ins, err := g.Nodes()
		if err != nil {
			continue
		}
		ids := make(map[string]bool, len(ins))
		for _, in := range ins {
			if in.Status == nil || in.Status.State != cloudprovider.InstanceDeleting {
				ids[in.Id] = true
			}
		}
		live[g.Id()] = ids
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.removed {
		ids, listed := live[r.group]
		_, exists := targets[r.group]
		switch {
		case !now.Before(r.until):
			klog.V(2).InfoS("Shadow mode: showing a node removed in shadow again (hold ended)", "node", r.node, "nodeGroup", r.group)
			delete(p.removed, id)
		case !exists || (listed && !ids[id]):
			delete(p.removed, id)
		}
	}
	for id, r := range p.resized {
		t, ok := targets[id]
		if !now.Before(r.until) || !ok || t != r.base {
			klog.V(2).InfoS("Shadow mode: showing a node group's real target again", "nodeGroup", id, "realTarget", t, "wouldBeDelta", r.delta)
			delete(p.resized, id)
		}
	}
	for id, c := range p.created {
		if _, real := targets[id]; real || !now.Before(c.until) {
			delete(p.created, id)
		}
	}
	for id, until := range p.deleted {
		if _, real := targets[id]; !real || !now.Before(until) {
			delete(p.deleted, id)
		}
	}
	return nil
}

// Problems are the real provider's, when it reports any.
func (p *Provider) Problems() []string {
	if r, ok := p.inner.(cloudprovider.ProblemReporter); ok {
		return r.Problems()
	}
	return nil
}

// DeletingInstances are the real provider's, when it reports them.
func (p *Provider) DeletingInstances() map[string]bool {
	if r, ok := p.inner.(cloudprovider.DeletingInstancesReporter); ok {
		return r.DeletingInstances()
	}
	return nil
}

// InstanceQuota is the real provider's account quota, when it reads one
// (shadow mode sends no write, so the real count is the one to plan by).
func (p *Provider) InstanceQuota() (cloudprovider.InstanceQuota, bool) {
	if r, ok := p.inner.(cloudprovider.InstanceQuotaReporter); ok {
		return r.InstanceQuota()
	}
	return cloudprovider.InstanceQuota{}, false
}

// SetDRAListers hands the listers to the real provider, when it takes them.
func (p *Provider) SetDRAListers(l cloudprovider.DRAListers) {
	if a, ok := p.inner.(cloudprovider.DRAAware); ok {
		a.SetDRAListers(l)
	}
}

// resizeHold is how long a would-be resize of g is shown: the hold, and
// at most half the group's max node provision time.
func (p *Provider) resizeHold(g cloudprovider.NodeGroup) time.Duration {
	provision := p.opts.Defaults.MaxNodeProvisionTime
	if o, err := g.GetOptions(p.opts.Defaults); err == nil && o != nil && o.MaxNodeProvisionTime > 0 {
		provision = o.MaxNodeProvisionTime
	}
	hold := p.opts.Hold
	if provision > 0 && provision/2 < hold {
		hold = provision / 2
	}
	return hold
}

// group wraps a real node group, or (created) a planned group that exists
// in shadow only.
type group struct {
	p       *Provider
	inner   cloudprovider.NodeGroup
	created bool
}

func (g *group) MaxSize() int  { return g.inner.MaxSize() }
func (g *group) MinSize() int  { return g.inner.MinSize() }
func (g *group) Id() string    { return g.inner.Id() }
func (g *group) Debug() string { return g.inner.Debug() }
func (g *group) TemplateNodeInfo() (*framework.NodeInfo, error) {
	return g.inner.TemplateNodeInfo()
}
func (g *group) Autoprovisioned() bool { return g.inner.Autoprovisioned() }
func (g *group) GetOptions(defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	return g.inner.GetOptions(defaults)
}

// MaxHourlyCost is the real group's limit, 0 (none) when it has none.
func (g *group) MaxHourlyCost() float64 {
	if l, ok := g.inner.(cloudprovider.HourlyCostLimiter); ok {
		return l.MaxHourlyCost()
	}
	return 0
}

// Unavailable is the real group's word on its size (shadow sends no
// write, so only the Sizes API's catalogue and timeouts can mark one).
func (g *group) Unavailable() string {
	if a, ok := g.inner.(cloudprovider.AvailabilityReporter); ok {
		return a.Unavailable()
	}
	return ""
}

// NodesNeverCame is passed on to the real group.
func (g *group) NodesNeverCame() {
	if l, ok := g.inner.(cloudprovider.ProvisionTimeoutLearner); ok {
		l.NodesNeverCame()
	}
}

// Exist is true for a group created in shadow while it is shown.
func (g *group) Exist() bool {
	if g.created {
		return true
	}
	if g.inner.Exist() {
		g.p.mu.Lock()
		defer g.p.mu.Unlock()
		until, ok := g.p.deleted[g.Id()]
		return !ok || !g.p.opts.Now().Before(until)
	}
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	c, ok := g.p.created[g.Id()]
	return ok && g.p.opts.Now().Before(c.until)
}

// TargetSize is the real target with the would-be changes.
func (g *group) TargetSize() (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.targetLocked()
}

func (g *group) targetLocked() (int, error) {
	now := g.p.opts.Now()
	id := g.Id()
	if c, ok := g.p.created[id]; ok && now.Before(c.until) {
		if g.created || !g.inner.Exist() {
			return c.target, nil
		}
	}
	real, err := g.inner.TargetSize()
	if err != nil {
		return real, err
	}
	target := real
	if r, ok := g.p.resized[id]; ok && now.Before(r.until) && r.base == real {
		target += r.delta
	}
	for _, r := range g.p.removed {
		if r.group == id && now.Before(r.until) {
			target--
		}
	}
	return max(target, 0), nil
}

// Nodes are the real instances less those removed in shadow.
func (g *group) Nodes() ([]cloudprovider.Instance, error) {
	if g.created {
		return nil, nil
	}
	ins, err := g.inner.Nodes()
	if err != nil {
		return ins, err
	}
	out := make([]cloudprovider.Instance, 0, len(ins))
	for _, in := range ins {
		if !g.p.hidden(in.Id) {
			out = append(out, in)
		}
	}
	return out, nil
}

// IncreaseSize checks delta as the provider does and records it.
func (g *group) IncreaseSize(delta int) error { return g.increase(delta) }

// AtomicIncreaseSize is IncreaseSize: nothing is sent, so all or none holds.
func (g *group) AtomicIncreaseSize(delta int) error { return g.increase(delta) }

func (g *group) increase(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.Id(), delta)
	}
	if !g.Exist() {
		return fmt.Errorf("node group %s does not exist yet: create it first", g.Id())
	}
	if err := g.resize(delta, func(target int) error {
		if target > g.MaxSize() {
			return fmt.Errorf("node group %s: size increase too large: desired %d, max %d (current %d)", g.Id(), target, g.MaxSize(), target-delta)
		}
		return nil
	}); err != nil {
		return err
	}
	g.p.record(Write{Op: OpIncreaseSize, Group: g.Id(), Delta: delta})
	return nil
}

// DecreaseTargetSize checks delta as the provider does and records it.
func (g *group) DecreaseTargetSize(delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.Id(), delta)
	}
	if !g.Exist() {
		return fmt.Errorf("node group %s does not exist yet", g.Id())
	}
	if err := g.resize(delta, func(target int) error {
		if target < g.MinSize() {
			return fmt.Errorf("node group %s: size decrease too large: desired %d, min %d (current %d)", g.Id(), target, g.MinSize(), target-delta)
		}
		return nil
	}); err != nil {
		return err
	}
	g.p.record(Write{Op: OpDecreaseTargetSize, Group: g.Id(), Delta: delta})
	return nil
}

// resize adds delta to the would-be target once check accepts the new
// target.
func (g *group) resize(delta int, check func(target int) error) error {
	hold := g.p.resizeHold(g.inner)
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	cur, err := g.targetLocked()
	if err != nil {
		return err
	}
	if err := check(cur + delta); err != nil {
		return err
	}
	now := g.p.opts.Now()
	id := g.Id()
	if c, ok := g.p.created[id]; ok && now.Before(c.until) && (g.created || !g.inner.Exist()) {
		c.target += delta
		return nil
	}
	real, err := g.inner.TargetSize()
	if err != nil {
		return err
	}
	r, ok := g.p.resized[id]
	if !ok || !now.Before(r.until) || r.base != real {
		r = &resize{base: real}
		g.p.resized[id] = r
	}
	r.delta += delta
	r.until = now.Add(hold)
	return nil
}

// DeleteNodes checks that the nodes are the group's and that the group
// stays at or above its minimum, and records their removal.
func (g *group) DeleteNodes(nodes []*apiv1.Node) error { return g.deleteNodes(nodes, false) }

// ForceDeleteNodes is DeleteNodes without the minimum, when the real group
// supports it.
func (g *group) ForceDeleteNodes(nodes []*apiv1.Node) error { return g.deleteNodes(nodes, true) }

func (g *group) deleteNodes(nodes []*apiv1.Node, force bool) error {
	if !g.Exist() || g.created {
		return fmt.Errorf("node group %s does not exist yet", g.Id())
	}
	ins, err := g.Nodes()
	if err != nil {
		return fmt.Errorf("node group %s: listing its instances: %w", g.Id(), err)
	}
	state := map[string]*cloudprovider.InstanceStatus{}
	for _, in := range ins {
		state[in.Id] = in.Status
	}
	var ids, names []string
	for _, n := range nodes {
		st, ok := state[n.Spec.ProviderID]
		if n.Spec.ProviderID == "" || !ok {
			return fmt.Errorf("node group %s: node %s (provider ID %q) is not one of its instances", g.Id(), n.Name, n.Spec.ProviderID)
		}
		if st != nil && st.State == cloudprovider.InstanceDeleting {
			continue // already going, as the provider would skip it
		}
		if !contains(ids, n.Spec.ProviderID) {
			ids = append(ids, n.Spec.ProviderID)
			names = append(names, n.Name)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	g.p.mu.Lock()
	cur, err := g.targetLocked()
	if err == nil && !force && cur-len(ids) < g.MinSize() {
		err = fmt.Errorf("node group %s: deleting %d nodes would take the target from %d below the minimum of %d", g.Id(), len(ids), cur, g.MinSize())
	}
	if err != nil {
		g.p.mu.Unlock()
		return err
	}
	until := g.p.opts.Now().Add(g.p.opts.Hold)
	for i, id := range ids {
		g.p.removed[id] = &removal{group: g.Id(), node: names[i], until: until}
	}
	g.p.mu.Unlock()
	g.p.record(Write{Op: OpDeleteNodes, Group: g.Id(), Delta: len(ids), Nodes: names})
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// errExists is returned by Create for a group that exists already.
var errExists = cloudprovider.ErrAlreadyExist

// Create records the creation of a planned group with one node (the
// provider's own initial size).
func (g *group) Create() (cloudprovider.NodeGroup, error) { return g.CreateWithSize(1) }

// CreateWithSize records the creation of a planned group with count nodes
// and returns it as an existing group, shown for the hold.
func (g *group) CreateWithSize(count int) (cloudprovider.NodeGroup, error) {
	if g.Exist() {
		return nil, fmt.Errorf("node group %s: %w", g.Id(), errExists)
	}
	if count <= 0 {
		return nil, fmt.Errorf("node group %s: a new group needs at least one node, got %d", g.Id(), count)
	}
	if count > g.MaxSize() {
		return nil, fmt.Errorf("node group %s: %d nodes asked, max %d", g.Id(), count, g.MaxSize())
	}
	hold := g.p.resizeHold(g.inner)
	g.p.mu.Lock()
	g.p.created[g.Id()] = &createdGroup{planned: g.inner, target: count, until: g.p.opts.Now().Add(hold)}
	g.p.mu.Unlock()
	g.p.record(Write{Op: OpCreateNodeGroup, Group: g.Id(), Delta: count})
	return &group{p: g.p, inner: g.inner, created: true}, nil
}

// Delete records the deletion of the group and leaves it out of
// NodeGroups for the hold.
func (g *group) Delete() error {
	if !g.Exist() {
		return errors.New("node group " + g.Id() + " does not exist")
	}
	g.p.mu.Lock()
	if g.created {
		delete(g.p.created, g.Id())
	} else {
		g.p.deleted[g.Id()] = g.p.opts.Now().Add(g.p.opts.Hold)
	}
	g.p.mu.Unlock()
	g.p.record(Write{Op: OpDeleteNodeGroup, Group: g.Id()})
	return nil
}
