package digitalocean

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

const providerIDPrefix = "digitalocean://"

// errTemplateRefused marks a template that was fetched but whose values
// make no sense (see buildTemplateNode).
var errTemplateRefused = errors.New("template refused")

// templateEntry is a cached node pool template.
type templateEntry struct {
	template *godo.KubernetesNodeTemplate
	// spec is the pool's name, size, labels and taints when the template
	// was fetched; a different spec means the template is out of date.
	spec      string
	fetchedAt time.Time
	// err is the last fetch failure; nil once a fetch succeeded since.
	err error
}

// manager holds what one Refresh learnt from DigitalOcean. Everything the
// core asks between Refreshes is answered from here without API calls.
type manager struct {
	client *apiClient
	o      clientOptions
	// ctx is the context of every DigitalOcean call, for the provider's
	// lifetime: the provider contract (upstream's CloudProvider and
	// NodeGroup) passes none to Refresh, IncreaseSize or DeleteNodes, so
	// the provider owns one, and stop (Cleanup) ends it, cancelling calls
	// still retrying at shutdown.
	ctx  context.Context
	stop context.CancelFunc
	// gpuLabel is the label marking GPU nodes (--gpu-label).
	gpuLabel string
	// selection is the node_pool_selection mode: SelectByAutoScale or
	// SelectByTags.
	selection string
	// dra reads the cluster's DeviceClasses and ResourceSlices, to tell
	// which GPU DRA drivers run (see gpuSlices); set once, before the first
	// iteration, by SetDRAListers.
	dra atomic.Pointer[cloudprovider.DRAListers]

	mu sync.RWMutex
	// groups are the autoscaled pools, in API order.
	groups []*NodeGroup
	// groupByInstance maps provider IDs (and DOKS node IDs) of nodes in
	// autoscaled pools to their group.
	groupByInstance map[string]*NodeGroup
	groupByNodeID   map[string]*NodeGroup
	// sizeByInstance maps provider IDs of nodes in every pool, autoscaled
	// or not, to the pool's size slug; HasInstance and pricing use it.
	sizeByInstance map[string]string
	// deletingInstances are the provider IDs of nodes of every pool that
	// DOKS lists as draining or deleting (see DeletingInstances).
	deletingInstances map[string]bool
	// templates by pool ID.
	templates map[string]*templateEntry
	// counters by pool ID, kept across Refreshes (see poolCounter).
	counters map[string]*poolCounter
	// notes are the selection notes last logged, by pool ID, so a warning
	// about a pool is logged when it changes rather than every Refresh.
	notes     map[string]string
	refreshed bool
	// problems the last Refresh found for the operator (see Problems).
	problems []string

	// flagsGiven names the flags set on the command line: the cluster's
	// settings never override those.
	flagsGiven map[string]bool
	// settings are the cluster's autoscaler settings; settingsAt is the last
	// attempt to read them, settingsRead whether one ever succeeded.
	settings     clusterSettings
	settingsAt   time.Time
	settingsRead bool
	// region is the cluster's region slug, read with the settings; it
	// labels template nodes as DOKS labels real ones.
	region string

	// poolDroplets are the droplets of the cluster's pools in the last
	// listing (each pool's count, or its nodes if more are listed).
	poolDroplets int
	// quota is the account's droplet limit (quota.go).
	quota dropletQuota
	// unavailable are the sizes that cannot be had now (unavailable.go),
	// held for unavailableTTL; pricing is the provider's pricing model,
	// whose catalogue says which sizes the Sizes API offers.
	unavailable    unavailableSizes
	unavailableTTL time.Duration
	pricing        *pricingModel

	// priceOverrides are the cloud config's price_overrides (size slug →
	// USD an hour); set before the first Refresh, read-only after.
	priceOverrides map[string]float64
	// provisionTimes are the cloud config's max_node_provision_time_by_size.
	provisionTimes map[string]time.Duration

	// autoprovisioning is the cloud config's section; nil: pools are never
	// created.
	autoprovisioning *autoprovisioningConfig
	// predicted are the templates created pools were chosen by, until
	// their real template is fetched and compared (by pool ID).
	predicted map[string]*godo.KubernetesNodeTemplate
	// poolNames are the names of every listed pool, so a new pool's name
	// never collides.
	poolNames map[string]bool
	// deleted are the pools this autoscaler deleted (by ID, never reused):
	// their groups no longer exist, even those an older Refresh made, and
	// a listing that still shows one while DOKS drains it makes no group
	// of it. An entry goes once a listing no longer shows the pool, or
	// shows it without nodes (see pruneLocked).
	deleted map[string]bool

	// creating are the pools created, or maybe created, that no listing
	// has shown yet, by name (see creation.go); created are the names of
	// the pools this process created, while listed, to tell one listed
	// without its tag.
	creating map[string]*creation
	created  map[string]bool
	// createPause is how long node pool creation stops after a creation
	// was never listed (--initial-node-group-backoff-duration);
	// createMissed says which and createResume until when.
	createPause  time.Duration
	createMissed string
	createResume time.Time
	// createStop says why node pool creation is stopped, from the last
	// Refresh's problems; "" when it is not.
	createStop string
}

func newManager(client *apiClient, o clientOptions, gpuLabel, selection string) *manager {
	if selection == "" {
		selection = SelectByAutoScale
	}
	ctx, stop := context.WithCancel(context.Background())
	return &manager{
		client:          client,
		o:               o,
		ctx:             ctx,
		stop:            stop,
		gpuLabel:        gpuLabel,
		selection:       selection,
		groupByInstance: map[string]*NodeGroup{},
		groupByNodeID:   map[string]*NodeGroup{},
		sizeByInstance:  map[string]string{},
		templates:       map[string]*templateEntry{},
		counters:        map[string]*poolCounter{},
		notes:           map[string]string{},
		predicted:       map[string]*godo.KubernetesNodeTemplate{},
		poolNames:       map[string]bool{},
		deleted:         map[string]bool{},
		creating:        map[string]*creation{},
		created:         map[string]bool{},
		createPause:     5 * time.Minute,
	}
}

// instanceID is the provider ID a DOKS node's Kubernetes Node carries. A
// node whose droplet is not created yet has no droplet ID; it gets a
// placeholder built from the DOKS node ID, so that each instance stays
// distinct until the droplet exists.
func instanceID(n *godo.KubernetesNode) string {
	if n.DropletID != "" {
		return providerIDPrefix + n.DropletID
	}
	return providerIDPrefix + "node-" + n.ID
}

// poolSpec summarises what a template depends on.
func poolSpec(p *godo.KubernetesNodePool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name=%s;size=%s;labels=", p.Name, p.Size)
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		fmt.Fprintf(&b, "%q=%q,", k, p.Labels[k])
	}
	taints := make([]string, 0, len(p.Taints))
	for _, t := range p.Taints {
		taints = append(taints, fmt.Sprintf("%q=%q:%q", t.Key, t.Value, t.Effect))
	}
	sort.Strings(taints)
	b.WriteString(";taints=")
	b.WriteString(strings.Join(taints, ","))
	return b.String()
}

// Refresh lists every node pool (all pages) and rebuilds the node groups:
// the pools selectPool accepts in the configured mode.
//
// Templates are fetched only for a pool that is new, whose name, size,
// labels or taints changed, whose template is older than templateTTL, or
// whose last fetch failed; in steady state a Refresh is one list request
// per page of pools.
//
// A template failure does not fail the Refresh: the other pools are kept.
// The failing pool keeps its previous template when it had one; otherwise it
// is still a node group (it can shrink, and grow once it has nodes the core
// can copy) but TemplateNodeInfo returns the error, so it cannot scale up
// from zero. The fetch is tried again at the next Refresh. A failure to list
// pools fails the Refresh and leaves the previous state in place.
func (m *manager) Refresh(ctx context.Context) error {
	start := m.o.clock.Now()
	// The counters' versions from before the listing: a count change that
	// lands after them is newer than what the listing says.
	m.mu.RLock()
	gens := make(map[string]uint64, len(m.counters))
	for id, c := range m.counters {
		gens[id], _ = c.load()
	}
	// Only entries from before the listing may be pruned by it.
	deletedBefore, predictedBefore := maps.Clone(m.deleted), slices.Collect(maps.Keys(m.predicted))
	m.mu.RUnlock()
	pools, err := m.client.listNodePools(ctx)
	if err != nil {
		return fmt.Errorf("listing node pools of cluster %s: %w", m.client.clusterID, err)
	}
	m.mu.RLock()
	oldTemplates, oldNotes := m.templates, m.notes
	m.mu.RUnlock()

	now := m.o.clock.Now()
	templates := make(map[string]*templateEntry, len(pools))
	notes := make(map[string]string, len(pools))
	var groups []*NodeGroup
	byInstance := map[string]*NodeGroup{}
	byNodeID := map[string]*NodeGroup{}
	sizes := map[string]string{}
	deleting := map[string]bool{}
	names := map[string]bool{}
	fetched, failed := 0, 0
	seen := make(map[string]bool, len(pools))
	for _, p := range pools {
		if p == nil {
			continue
		}
		if seen[p.ID] {
			// A listing that repeats a pool (pages shifting under it, a
			// broken server) must not make two node groups of it.
			klog.V(2).InfoS("Node pool listed twice: using its first entry", "nodePool", p.Name, "nodeGroup", p.ID)
			continue
		}
		seen[p.ID] = true
		names[p.Name] = true
		ids := make([]string, len(p.Nodes))
		for i, n := range p.Nodes {
			if n != nil {
				ids[i] = instanceID(n)
				sizes[ids[i]] = p.Size
				if leaving(n) {
					deleting[ids[i]] = true
				}
			}
		}
		if m.isDeleted(p.ID) || beingDeleted(p) {
			klog.V(2).InfoS("Node pool is being deleted: not a node group", "nodePool", p.Name, "nodeGroup", p.ID)
			continue
		}
		v := selectPool(m.selection, p)
		logVerdict(p.ID, v, oldNotes[p.ID])
		if v.refused != "" && v.note != oldNotes[p.ID] {
			observeRefusal(m.client.observer, v.refused)
		}
		notes[p.ID] = v.note
		if !v.group {
			continue
		}
		entry, didFetch := m.template(ctx, p, oldTemplates[p.ID], now)
		if didFetch {
			fetched++
			if entry.err != nil {
				failed++
				if errors.Is(entry.err, errTemplateRefused) {
					observeRefusal(m.client.observer, refusedTemplate)
				}
			}
		}
		templates[p.ID] = entry
		g := newNodeGroup(m, p, v.minSize, v.maxSize, entry, m.counter(p.ID), gens[p.ID])
		groups = append(groups, g)
		for i, n := range p.Nodes {
			if n == nil {
				continue
			}
			byInstance[ids[i]] = g
			if n.ID != "" {
				byNodeID[n.ID] = g
			}
		}
	}
	for id := range oldTemplates {
		if _, ok := templates[id]; !ok {
			klog.V(2).InfoS("Node pool is gone or no longer autoscaled: dropping its cached template", "nodeGroup", id)
		}
	}

	m.refreshCluster(ctx, now)
	problems := m.tagScopeProblem(pools)

	m.mu.Lock()
	// A pool deleted while it was being listed is no node group either.
	groups = slices.DeleteFunc(groups, func(g *NodeGroup) bool { return m.deleted[g.id] })
	// Pools created and not listed yet stay node groups.
	creating, createProblems := m.reconcileCreationsLocked(pools, now)
	for _, g := range creating {
		groups = append(groups, g)
		templates[g.id] = g.template
		g.mu.Lock()
		indexNodes(byInstance, byNodeID, sizes, g, g.pool)
		g.mu.Unlock()
	}
	problems = append(problems, createProblems...)
	m.createStop = ""
	if m.autoprovisioning != nil && len(problems) > 0 {
		m.createStop = strings.Join(problems, "; ")
	}
	for id := range m.counters {
		if templates[id] == nil {
			delete(m.counters, id) // the pool is gone or no longer a node group
		}
	}
	m.pruneLocked(pools, deletedBefore, predictedBefore, templates)
	m.groups, m.groupByInstance, m.groupByNodeID, m.sizeByInstance, m.templates = groups, byInstance, byNodeID, sizes, templates
	m.deletingInstances = deleting
	m.notes = notes
	m.poolNames = names
	m.poolDroplets = poolDroplets(pools, creating)
	m.refreshed = true
	previous := m.problems
	m.problems = problems
	m.mu.Unlock()
	for _, p := range problems {
		if !slices.Contains(previous, p) {
			klog.ErrorS(nil, "DigitalOcean provider problem", "problem", p)
		}
	}

	if len(groups) == 0 {
		// Upstream's words, which operators search for: kept as they are.
		klog.InfoS("cluster-autoscaler is disabled. no node pools are configured")
	}
	if fetched > 0 || klog.V(2).Enabled() {
		klog.InfoS("DigitalOcean refresh", "nodePools", len(pools), "nodeGroups", len(groups), "nodePoolSelection", m.selection,
			"templatesFetched", fetched, "templatesFailed", failed, "took", m.o.clock.Now().Sub(start).Round(time.Millisecond))
	}
	return nil
}

// tagScopeProblem explains a listing in which no pool carries any tag, in
// tags mode or with node autoprovisioning. DOKS tags every pool k8s,
// k8s-worker and k8s:<cluster id>, so untagged pools mean the token cannot
// read tags: DigitalOcean's API specification says a pool's tags require
// the tag:read scope, and a custom-scoped token without it is answered
// with pools without tags. Tags mode then finds no node group; without
// this, only "no node pools are configured" would be logged. A pool
// created without its tag showing would never be recognised as this
// autoscaler's, so with autoprovisioning the problem stops creation
// before the first pool is made.
func (m *manager) tagScopeProblem(pools []*godo.KubernetesNodePool) []string {
	if (m.selection != SelectByTags && m.autoprovisioning == nil) || len(pools) == 0 {
		return nil
	}
	for _, p := range pools {
		if p != nil && len(p.Tags) > 0 {
			return nil
		}
	}
	var problems []string
	if m.selection == SelectByTags {
		problems = append(problems, fmt.Sprintf("node_pool_selection=tags: none of the cluster's %d node pools carries any tag, though DOKS tags every pool k8s, k8s-worker and k8s:%s: "+
			"the DigitalOcean API token most likely lacks the tag:read scope (without it DigitalOcean lists pools without their tags), so no pool can be selected by its tags; "+
			"give the token tag:read", len(pools), m.client.clusterID))
	}
	if m.autoprovisioning != nil {
		problems = append(problems, fmt.Sprintf("node autoprovisioning: none of the cluster's %d node pools carries any tag, though DOKS tags every pool k8s, k8s-worker and k8s:%s: "+
			"the DigitalOcean API token most likely lacks the tag:read scope, so a pool created with the tag %s could not be recognised as this autoscaler's, "+
			"and node pool creation is stopped; give the token tag:read and tag:create", len(pools), m.client.clusterID, TagAutoprovisioned))
	}
	return problems
}

// Problems are those the last Refresh found (cloudprovider.ProblemReporter).
func (m *manager) Problems() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.problems)
}

// counter returns the pool's counter, made on first use.
func (m *manager) counter(poolID string) *poolCounter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counters[poolID]
	if c == nil {
		c = &poolCounter{}
		m.counters[poolID] = c
	}
	return c
}

// logVerdict logs the selection note of pool id. Problems (an error line:
// the operator should fix the pool's configuration) and new node groups are
// logged at once, then again only when the note changes (the pool's tags,
// flags or name changed), not at every Refresh; routine notes (a pool left
// alone by design) only at -v=4.
func logVerdict(id string, v poolVerdict, previous string) {
	switch {
	case v.note == "":
	case v.note == previous || (!v.warn && !v.group):
		klog.V(4).InfoS("Node pool selection", "nodePool", id, "note", v.note)
	case v.warn:
		klog.ErrorS(nil, "Node pool selection: check the pool's configuration", "nodePool", id, "note", v.note)
	default:
		klog.InfoS("Node pool selection", "nodePool", id, "note", v.note)
	}
}

// template returns the pool's template entry, fetching it when needed.
func (m *manager) template(ctx context.Context, p *godo.KubernetesNodePool, old *templateEntry, now time.Time) (*templateEntry, bool) {
	spec := poolSpec(p)
	var reason string
	switch {
	case old == nil:
		reason = "new node pool"
	case old.template == nil && !errors.Is(old.err, errTemplateRefused):
		reason = "no template yet (last fetch failed)"
	case old.spec != spec:
		reason = "node pool spec changed"
	case now.Sub(old.fetchedAt) >= m.o.templateTTL:
		reason = "cached template expired"
	default:
		return old, false
	}
	klog.V(2).InfoS("Fetching node pool template", "nodePool", p.Name, "nodeGroup", p.ID, "why", reason)
	t, err := m.client.getNodePoolTemplate(ctx, p.Name)
	if err == nil {
		// Checked now, not only when the core asks for it, so that a bad
		// template is logged (and counted) once per fetch.
		if _, berr := buildTemplateNode(p, t, m.gpuLabel, ""); berr != nil {
			t, err = nil, fmt.Errorf("%w: %v", errTemplateRefused, berr)
		} else {
			m.comparePredicted(p, t)
		}
	}
	if err != nil {
		if old != nil && old.template != nil {
			klog.ErrorS(err, "Fetching node pool template failed; keeping the previous template and retrying at the next refresh", "nodePool", p.Name, "nodeGroup", p.ID)
			kept := *old
			kept.err = err
			return &kept, true
		}
		if errors.Is(err, errTemplateRefused) {
			// Fetched again when the pool's spec changes or the TTL passes,
			// as a good template would be.
			klog.ErrorS(err, "Node pool template refused; the pool cannot scale up from zero until it is fixed", "nodePool", p.Name, "nodeGroup", p.ID)
			return &templateEntry{err: err, spec: spec, fetchedAt: now}, true
		}
		klog.ErrorS(err, "Fetching node pool template failed; the pool cannot scale up from zero until a fetch succeeds (retried at the next refresh)", "nodePool", p.Name, "nodeGroup", p.ID)
		return &templateEntry{err: err}, true
	}
	return &templateEntry{template: t, spec: spec, fetchedAt: now}, true
}

func (m *manager) nodeGroups() []*NodeGroup {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.groups)
}

func (m *manager) groupForInstance(providerID, nodeID string) *NodeGroup {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g, ok := m.groupByInstance[providerID]; ok && providerID != "" {
		return g
	}
	if g, ok := m.groupByNodeID[nodeID]; ok && nodeID != "" {
		return g
	}
	return nil
}

// instanceSize returns the size slug of the pool holding the instance, and
// whether any pool holds it.
func (m *manager) instanceSize(providerID string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.sizeByInstance[providerID]
	return s, ok
}

// pruneLocked bounds the sets kept by pool ID with what a listing shows.
// A deleted pool's entry goes once the pool is no longer listed, or is
// listed without nodes: its deletion is over, or was never applied, and a
// pool of ours left empty is deleted again by the core (a 404 then counts
// as done). A predicted template goes once its pool is listed but not a
// node group, or not listed at all (its real template, when fetched,
// already took it: see comparePredicted). Only entries from before the
// listing (deletedBefore, predictedBefore) are judged by it: one made
// while it was taken may concern a pool it could not show yet.
func (m *manager) pruneLocked(pools []*godo.KubernetesNodePool, deletedBefore map[string]bool, predictedBefore []string, templates map[string]*templateEntry) {
	listed := make(map[string]*godo.KubernetesNodePool, len(pools))
	for _, p := range pools {
		if p != nil {
			listed[p.ID] = p
		}
	}
	for id := range deletedBefore {
		if p := listed[id]; p == nil || len(p.Nodes) == 0 {
			klog.V(2).InfoS("Deleted node pool no longer listed with nodes: forgetting it", "nodeGroup", id)
			delete(m.deleted, id)
		}
	}
	for _, id := range predictedBefore {
		if templates[id] == nil {
			delete(m.predicted, id)
		}
	}
}

// markDeleted records that this autoscaler deleted the pool.
func (m *manager) markDeleted(poolID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[poolID] = true
}

// isDeleted reports whether this autoscaler deleted the pool.
func (m *manager) isDeleted(poolID string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.deleted[poolID]
}

// forget drops a deleted pool's group until the next Refresh.
func (m *manager) forget(poolID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups = slices.DeleteFunc(slices.Clone(m.groups), func(g *NodeGroup) bool { return g.id == poolID })
	delete(m.templates, poolID)
	delete(m.predicted, poolID)
}

// poolDroplets counts the droplets of the listed pools (each pool's count,
// or its listed nodes when more are listed: nodes being deleted are billed
// and counted until destroyed) and of the pools being created that no
// listing shows yet (what was asked).
func poolDroplets(pools []*godo.KubernetesNodePool, creating []*NodeGroup) int {
	total := 0
	seen := map[string]bool{}
	for _, p := range pools {
		if p == nil || seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		total += max(p.Count, len(p.Nodes))
	}
	for _, g := range creating {
		g.mu.Lock()
		total += g.pool.Count
		g.mu.Unlock()
	}
	return total
}
