package digitalocean

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Labels DOKS puts on every node.
const (
	LabelNodeID     = "doks.digitalocean.com/node-id"
	LabelNodePool   = "doks.digitalocean.com/node-pool"
	LabelNodePoolID = "doks.digitalocean.com/node-pool-id"
)

// errorCodeDigitalOcean is the error code of instances in a state the
// provider does not know (the same code upstream uses).
const errorCodeDigitalOcean = "no-code-digitalocean"

// NodeGroup is a DOKS node pool this autoscaler manages (see selectPool). Its state is the pool as the
// last Refresh saw it, updated by this group's own successful calls.
type NodeGroup struct {
	m *manager

	id, name string
	minSize  int
	maxSize  int
	template *templateEntry

	// mu guards pool: the core may delete nodes of one group in parallel.
	mu   sync.Mutex
	pool *godo.KubernetesNodePool
	// counter is shared with the pool's groups of other Refreshes; gen is
	// its version when the pool listing behind this group was taken.
	counter *poolCounter
	gen     uint64

	// planned is the size of a group that does not exist yet (NewNodeGroup);
	// nil for a pool that exists.
	planned *godo.Size
	// pending: the group stands for a pool whose creation went unanswered
	// (see creation.go): its ID is the pool's name until a listing shows
	// the pool, and it cannot be changed before.
	pending bool
}

var _ cloudprovider.NodeGroup = (*NodeGroup)(nil)

// poolCounter outlives the NodeGroup each Refresh makes for a pool. A
// deletion started on one Refresh's group may still run when the next
// Refresh's group scales the pool up: the counter serializes the calls that
// change the count, and keeps the count the last one left, so that a group
// built from an older listing never sends a count computed from it.
type poolCounter struct {
	// op is held across a call that changes the count.
	op sync.Mutex
	// mu guards version (one more for each change) and count.
	mu      sync.Mutex
	version uint64
	count   int
}

func (c *poolCounter) load() (uint64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version, c.count
}

// store records a count DOKS confirmed and returns the new version.
func (c *poolCounter) store(count int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.count = count
	return c.version
}

// newNodeGroup makes a group of pool p with the bounds its selection gave
// (min_nodes/max_nodes, or the pool's tags); gen is the counter's version
// from before p was listed. The group takes p and changes its count: every
// caller passes a pool of its own, decoded from the API's answer or built
// for the group (copying it cost a copy of every node of every pool each
// loop).
func newNodeGroup(m *manager, p *godo.KubernetesNodePool, minSize, maxSize int, t *templateEntry, counter *poolCounter, gen uint64) *NodeGroup {
	return &NodeGroup{m: m, id: p.ID, name: p.Name, minSize: minSize, maxSize: maxSize, template: t, pool: p,
		counter: counter, gen: gen}
}

// syncCountLocked takes the count a later change left, when there was one.
func (g *NodeGroup) syncCountLocked() {
	if v, n := g.counter.load(); v > g.gen {
		g.pool.Count, g.gen = n, v
	}
}

// lockForChange serializes a count change with the pool's other groups.
func (g *NodeGroup) lockForChange() (unlock func()) {
	g.counter.op.Lock()
	g.mu.Lock()
	g.syncCountLocked()
	return func() { g.mu.Unlock(); g.counter.op.Unlock() }
}

func copyPool(p *godo.KubernetesNodePool) *godo.KubernetesNodePool {
	c := *p
	c.Nodes = make([]*godo.KubernetesNode, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		if n == nil {
			continue
		}
		nc := *n
		if n.Status != nil {
			st := *n.Status
			nc.Status = &st
		}
		c.Nodes = append(c.Nodes, &nc)
	}
	return &c
}

// Id is the DOKS node pool ID.
func (g *NodeGroup) Id() string { return g.id }

// Debug describes the group; the text is upstream's, word for word.
func (g *NodeGroup) Debug() string {
	return fmt.Sprintf("cluster ID: %s (min:%d max:%d)", g.id, g.minSize, g.maxSize)
}

// MinSize is the pool's min_nodes, or its min tag.
func (g *NodeGroup) MinSize() int { return g.minSize }

// MaxSize is the pool's max_nodes, or its max tag.
func (g *NodeGroup) MaxSize() int { return g.maxSize }

// TargetSize is the pool's count.
func (g *NodeGroup) TargetSize() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.syncCountLocked()
	return g.pool.Count, nil
}

// IncreaseSize raises the pool's count by delta with one UpdateNodePool.
func (g *NodeGroup) IncreaseSize(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node pool %s: size increase must be positive, got %d", g.name, delta)
	}
	if g.planned != nil {
		return fmt.Errorf("node group %s does not exist yet: create it first", g.id)
	}
	if g.pending {
		return fmt.Errorf("node pool %s is being created: it is changed once a listing shows it", g.name)
	}
	defer g.lockForChange()()
	if err := g.deletedErrLocked(); err != nil {
		return err
	}
	target := g.pool.Count + delta
	if target > g.maxSize {
		return fmt.Errorf("node pool %s: size increase too large: desired %d, max %d (current %d)", g.name, target, g.maxSize, g.pool.Count)
	}
	if err := g.m.unavailableErr(g.pool.Size); err != nil {
		return fmt.Errorf("node pool %s: %w", g.name, err)
	}
	if err := g.setCountLocked(target, "increase"); err != nil {
		return g.m.capacityRefusal(err, g.pool.Size)
	}
	return nil
}

// setCountLocked asks DOKS for a new count and updates the cache only when
// DOKS confirms it.
func (g *NodeGroup) setCountLocked(target int, what string) error {
	klog.InfoS("Setting node pool count", "nodeGroup", g.id, "nodePool", g.name, "from", g.pool.Count, "to", target, "why", what)
	updated, err := g.m.client.updateNodePoolCount(g.m.ctx, g.id, target)
	if err != nil {
		return g.m.dropletLimitError(fmt.Errorf("node pool %s: setting count to %d: %w", g.name, target, err))
	}
	if updated.Count != target {
		return fmt.Errorf("node pool %s: asked for count %d but DigitalOcean answered %d", g.name, target, updated.Count)
	}
	g.pool.Count = target
	g.gen = g.counter.store(target)
	if updated.Nodes != nil {
		// The answer lists the new (or leaving) nodes: Nodes() shows them
		// before the next Refresh.
		g.pool.Nodes = copyPool(updated).Nodes
	}
	return nil
}

// AtomicIncreaseSize asks for the whole delta in one UpdateNodePool call:
// DOKS takes the new count at once or refuses it (over max_nodes, over the
// account's Droplet limit: 422), so no partial count is ever requested.
// What DOKS does not promise is that every droplet of an accepted count
// boots; those that fail are given up on after --max-node-provision-time
// like any other, the request stays Provisioned (best effort, as upstream).
func (g *NodeGroup) AtomicIncreaseSize(delta int) error { return g.IncreaseSize(delta) }

// runningNodesLocked counts the pool's nodes that exist and are up.
func (g *NodeGroup) runningNodesLocked() int {
	n := 0
	for _, node := range g.pool.Nodes {
		if node.Status != nil && node.Status.State == "running" {
			n++
		}
	}
	return n
}

// DecreaseTargetSize lowers the pool's count by -delta, to give up on nodes
// that were requested but never came. It never goes below min_nodes nor
// below the number of running nodes (which would delete live nodes).
func (g *NodeGroup) DecreaseTargetSize(delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node pool %s: size decrease must be negative, got %d", g.name, delta)
	}
	if g.planned != nil {
		return fmt.Errorf("node group %s does not exist yet", g.id)
	}
	if g.pending {
		return fmt.Errorf("node pool %s is being created: it is changed once a listing shows it", g.name)
	}
	defer g.lockForChange()()
	if err := g.deletedErrLocked(); err != nil {
		return err
	}
	target := g.pool.Count + delta
	if target < g.minSize {
		return fmt.Errorf("node pool %s: size decrease too large: desired %d, min %d (current %d)", g.name, target, g.minSize, g.pool.Count)
	}
	if running := g.runningNodesLocked(); target < running {
		return fmt.Errorf("node pool %s: size decrease too large: desired %d but %d nodes are running (use DeleteNodes to remove them)", g.name, target, running)
	}
	return g.setCountLocked(target, "decrease target")
}

// findNodeLocked finds the DOKS node behind a Kubernetes Node: by the
// node-id label, else by provider ID.
func (g *NodeGroup) findNodeLocked(node *apiv1.Node) (*godo.KubernetesNode, error) {
	nodeID := node.Labels[LabelNodeID]
	if nodeID == "" && node.Annotations[cloudprovider.FakeNodeReasonAnnotation] != "" {
		// A placeholder for an instance that never became a Node: only its
		// provider ID is known, and it must match one of this pool's droplets.
		for _, n := range g.pool.Nodes {
			if node.Spec.ProviderID != "" && instanceID(n) == node.Spec.ProviderID {
				return n, nil
			}
		}
		return nil, fmt.Errorf("unregistered instance %q is not a node of node pool %s (%s)", node.Spec.ProviderID, g.name, g.id)
	}
	if nodeID == "" {
		return nil, fmt.Errorf("node %s has no %s label: it is not a DOKS node (or not registered yet) and cannot be deleted", node.Name, LabelNodeID)
	}
	for _, n := range g.pool.Nodes {
		if n.ID == nodeID {
			return n, nil
		}
	}
	if pid := node.Spec.ProviderID; pid != "" {
		for _, n := range g.pool.Nodes {
			if instanceID(n) == pid {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("node %s (node ID %s, provider ID %q) does not belong to node pool %s (%s)", node.Name, nodeID, node.Spec.ProviderID, g.name, g.id)
}

// DeleteNodes deletes the given nodes with skip_drain (the core has
// drained them) and no replacement; each deletion lowers the count by one.
// Every node is checked before the first call; the cached count follows
// each successful deletion, so a failure part-way leaves it right.
//
// When the nodes are every node left in a pool this autoscaler created
// (see wholePoolLocked), the pool itself is deleted instead, with one
// DeleteNodePool: the pool is not left behind at a count of 0. The group
// then no longer exists (Exist is false, its target 0, its nodes draining)
// and Delete, which the core calls on an emptied autoprovisioned group,
// has nothing left to do. Nodes of a pool already deleted go with it:
// nothing is asked and nothing fails.
//
// A deletion whose answer was unclear is settled by listing (see
// deletes.go): it fails only when DOKS did not take it, since a failure
// makes the core give the nodes back.
func (g *NodeGroup) DeleteNodes(nodes []*apiv1.Node) error {
	if g.planned != nil {
		return fmt.Errorf("node group %s does not exist yet", g.id)
	}
	defer g.lockForChange()()
	if g.m.isDeleted(g.id) {
		klog.InfoS("Node pool already deleted: its nodes go with it", "nodeGroup", g.id, "nodePool", g.name, "nodes", len(nodes))
		return nil
	}
	var targets []*godo.KubernetesNode
	seen := map[string]bool{}
	for _, node := range nodes {
		n, err := g.findNodeLocked(node)
		if err != nil {
			return err
		}
		if seen[n.ID] {
			continue
		}
		seen[n.ID] = true
		if n.Status != nil && (n.Status.State == "deleting" || n.Status.State == "draining") {
			klog.InfoS("Node is already going; not deleting it again", "node", klog.KObj(node), "nodeGroup", g.id, "nodePool", g.name, "state", n.Status.State)
			continue
		}
		targets = append(targets, n)
	}
	if len(targets) == 0 {
		return nil
	}
	if g.pool.Count-len(targets) < g.minSize {
		return fmt.Errorf("node pool %s: deleting %d nodes would take the count from %d below the minimum of %d", g.name, len(targets), g.pool.Count, g.minSize)
	}
	if g.wholePoolLocked(targets) {
		return g.deletePoolLocked(targets)
	}
	for i, n := range targets {
		klog.InfoS("Deleting node with skip_drain", "node", klog.KRef("", n.Name), "nodeGroup", g.id, "nodePool", g.name, "nodeID", n.ID, "dropletID", n.DropletID)
		if err := g.m.deleteNode(g.id, n.ID); err != nil {
			return fmt.Errorf("node pool %s: deleting node %s (%d of %d): %w", g.name, n.Name, i+1, len(targets), err)
		}
		g.pool.Count--
		g.gen = g.counter.store(g.pool.Count)
		n.Status = &godo.KubernetesNodeStatus{State: "deleting"}
	}
	return nil
}

// wholePoolLocked reports whether deleting targets would remove every
// node of a pool this autoscaler created, with autoprovisioning on: the
// count falls to 0 and each of the pool's other nodes is already being
// deleted. A pool without TagAutoprovisioned never qualifies, whatever its
// min: its last node is deleted as any other.
func (g *NodeGroup) wholePoolLocked(targets []*godo.KubernetesNode) bool {
	if g.m.autoprovisioning == nil || !isAutoprovisioned(g.pool) || g.pool.Count != len(targets) {
		return false
	}
	for _, n := range g.pool.Nodes {
		if slices.Contains(targets, n) || (n.Status != nil && (n.Status.State == "deleting" || n.Status.State == "draining")) {
			continue
		}
		return false
	}
	return true
}

// deletePoolLocked deletes the pool in place of its last nodes. DOKS drains
// and deletes them after its 204 (the API has no skip_drain for a pool: the
// core has drained them already, DaemonSet pods are all a second drain
// finds).
func (g *NodeGroup) deletePoolLocked(targets []*godo.KubernetesNode) error {
	names := make([]string, len(targets))
	for i, n := range targets {
		names[i] = n.Name
	}
	klog.InfoS("Deleting node pool in place of its last nodes", "pool", g.name, "id", g.id, "nodes", names)
	if err := g.m.deletePool(g.id); err != nil {
		return fmt.Errorf("node pool %s: deleting the pool in place of its last %d node(s): %w", g.name, len(targets), err)
	}
	g.m.markDeleted(g.id)
	g.pool.Count = 0
	g.gen = g.counter.store(0)
	for _, n := range g.pool.Nodes {
		if n.Status == nil || (n.Status.State != "deleting" && n.Status.State != "draining") {
			n.Status = &godo.KubernetesNodeStatus{State: "draining"}
		}
	}
	return nil
}

// deletedErrLocked refuses a change to a pool this autoscaler deleted.
func (g *NodeGroup) deletedErrLocked() error {
	if g.m.isDeleted(g.id) {
		return fmt.Errorf("node pool %s (%s) was deleted", g.name, g.id)
	}
	return nil
}

// ForceDeleteNodes is not offered: the provider never goes below min_nodes.
func (g *NodeGroup) ForceDeleteNodes([]*apiv1.Node) error { return cloudprovider.ErrNotImplemented }

// instanceStatus maps a DOKS node state to an instance state; states it does
// not know are reported as errors, so the core stops waiting for the node.
func instanceStatus(s *godo.KubernetesNodeStatus) *cloudprovider.InstanceStatus {
	state, message := "", ""
	if s != nil {
		state, message = s.State, s.Message
	}
	switch strings.ToLower(state) {
	case "provisioning":
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	case "running":
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	case "draining", "deleting":
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	}
	if message == "" {
		message = fmt.Sprintf("node is in state %q", state)
	}
	return &cloudprovider.InstanceStatus{ErrorInfo: &cloudprovider.InstanceErrorInfo{
		ErrorClass:   cloudprovider.OtherErrorClass,
		ErrorCode:    errorCodeDigitalOcean,
		ErrorMessage: message,
	}}
}

// Nodes lists the pool's nodes as instances named by provider ID.
func (g *NodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]cloudprovider.Instance, 0, len(g.pool.Nodes))
	for _, n := range g.pool.Nodes {
		out = append(out, cloudprovider.Instance{Id: instanceID(n), Status: instanceStatus(n.Status)})
	}
	return out, nil
}

// TemplateNodeInfo describes a new node of this pool from the cached
// template; it fails when no template could be fetched yet. A GPU pool's
// template carries the ResourceSlice its vendor's DRA driver will publish
// when the cluster runs that driver (see gpuSlices).
func (g *NodeGroup) TemplateNodeInfo() (*framework.NodeInfo, error) {
	if g.template == nil || g.template.template == nil {
		var cause error = fmt.Errorf("not fetched")
		if g.template != nil && g.template.err != nil {
			cause = g.template.err
		}
		return nil, fmt.Errorf("node pool %s (%s) has no template (retried at the next refresh): %w", g.name, g.id, cause)
	}
	g.mu.Lock()
	pool := copyPool(g.pool)
	g.mu.Unlock()
	g.m.mu.RLock()
	region := g.m.region
	g.m.mu.RUnlock()
	node, err := buildTemplateNode(pool, g.template.template, g.m.gpuLabel, region)
	if err != nil {
		return nil, fmt.Errorf("node pool %s (%s): %w", g.name, g.id, err)
	}
	ni := framework.NewNodeInfo(node)
	if slices := gpuSlices(node, g.template.template.Gpu, g.m.draDriverRuns); slices != nil {
		ni.SetResourceSlices(slices)
	}
	return ni, nil
}

// Exist is false for a group NewNodeGroup described and Create has not
// made yet, and for a pool this autoscaler deleted.
func (g *NodeGroup) Exist() bool { return g.planned == nil && !g.m.isDeleted(g.id) }

// Create makes the pool of a planned group with one node; CreateWithSize
// makes it with the nodes the pending pods need in one call, which the core
// prefers (DOKS creates a pool with at least one node).
func (g *NodeGroup) Create() (cloudprovider.NodeGroup, error) { return g.CreateWithSize(1) }

// CreateWithSize makes the pool of a planned group with count nodes.
func (g *NodeGroup) CreateWithSize(count int) (cloudprovider.NodeGroup, error) {
	if g.planned != nil {
		if err := g.m.unavailableErr(g.planned.Slug); err != nil {
			return nil, err
		}
	}
	created, err := g.create(count)
	if err != nil {
		if g.planned != nil {
			err = g.m.capacityRefusal(err, g.planned.Slug)
		}
		return nil, err
	}
	return created, nil
}

// Delete deletes the pool with DeleteNodePool; DOKS drains and deletes its
// nodes. Only a pool this autoscaler created (TagAutoprovisioned) is ever
// deleted: any other is refused whatever the caller thinks. A pool
// DeleteNodes already deleted with its last nodes is only forgotten.
func (g *NodeGroup) Delete() error {
	if g.planned != nil {
		return fmt.Errorf("node group %s does not exist", g.id)
	}
	defer g.lockForChange()()
	if g.m.isDeleted(g.id) {
		klog.V(2).InfoS("Node pool already deleted with its last nodes", "name", g.name, "id", g.id)
		g.m.forget(g.id)
		return nil
	}
	if !isAutoprovisioned(g.pool) {
		return fmt.Errorf("node pool %s (%s) has no tag %s: it was not created by this autoscaler and is never deleted by it", g.name, g.id, TagAutoprovisioned)
	}
	klog.InfoS("Deleting node pool", "name", g.name, "id", g.id)
	if err := g.m.deletePool(g.id); err != nil {
		return fmt.Errorf("deleting node pool %s (%s): %w", g.name, g.id, err)
	}
	g.m.markDeleted(g.id)
	g.m.forget(g.id)
	return nil
}

// Autoprovisioned is true for a planned group and for a pool carrying
// TagAutoprovisioned.
func (g *NodeGroup) Autoprovisioned() bool {
	if g.planned != nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return isAutoprovisioned(g.pool)
}

// GetOptions returns the process defaults with the cluster's own autoscaler
// settings (cluster_autoscaler_configuration) in place of the defaults of
// flags not given on the command line (DOKS has no per-pool autoscaler
// settings), and two options of the pool's own: Consolidate, read from the
// pool's tags as its bounds are (a pool this autoscaler created may always
// be consolidated: it chose its size for pods that may since have gone;
// another only with TagConsolidate), and the provision time of its size in
// the cloud config's max_node_provision_time_by_size.
func (g *NodeGroup) GetOptions(defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	o := g.m.nodeGroupOptions(defaults)
	o.Consolidate = g.Autoprovisioned() || g.hasTag(TagConsolidate)
	if d, ok := g.m.provisionTimes[g.sizeSlug()]; ok {
		o.MaxNodeProvisionTime = d
	}
	return &o, nil
}

func (g *NodeGroup) hasTag(tag string) bool {
	if g.planned != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.pool.Tags, tag)
}
