package digitalocean

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// A pool creation is reconciled by listing, never by sending it again: a
// POST whose answer was lost may have made the pool, and a second one
// would make another (or be refused as a name already taken). From the
// moment the request leaves until a listing shows the pool by its name,
// the pool is a node group of its own (its nodes upcoming), so the pods it
// is for cause no second scale-up; if no listing shows it within
// createListDeadline, creation stops for a while and the operator is told.

// createListDeadline is how long a pool that was (or may have been)
// created counts as being created while listings do not show it. DOKS
// lists a pool as soon as its creation is answered; minutes without it
// mean the creation was lost before it was applied.
const createListDeadline = 3 * time.Minute

// creation is a pool this autoscaler created, or may have created, that
// no listing has shown yet.
type creation struct {
	// group stands for the pool until a listing shows it: the pool the
	// 201 answered, or, when the answer was lost, the request itself
	// (named, not yet known by ID).
	group  *NodeGroup
	sentAt time.Time
	// untagged: the 201 showed the pool without TagAutoprovisioned.
	untagged bool
}

// poolName is the name of the planned group's pool: the prefix, the
// planned group's ID without "autoprovisioned-" (the size slug and, for
// labels or taints, their hash) and the lowest sequence number no listed
// pool and no creation in flight has, cut to a DNS label. It is derived
// from what the plan decided, not drawn at random, so that the request
// sent is the one looked for in the listings.
func poolName(prefix, plannedID string, taken func(string) bool) (string, error) {
	base := strings.Trim(strings.ToLower(prefix+strings.TrimPrefix(plannedID, plannedIDPrefix)), "-")
	for n := 1; n <= maxMaxNodesPerPool; n++ {
		suffix := "-" + strconv.Itoa(n)
		b := base
		if len(b)+len(suffix) > poolNameMax {
			b = strings.TrimRight(b[:poolNameMax-len(suffix)], "-")
		}
		name := b + suffix
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return "", fmt.Errorf("node pool name %q: %s", name, strings.Join(errs, "; "))
		}
		if !taken(name) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no free node pool name for %s%s", prefix, plannedID)
}

// poolNameTaken reports whether a listed pool or a creation in flight has
// the name.
func (m *manager) poolNameTaken(name string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.poolNames[name] || m.creating[name] != nil
}

// create makes the planned group's pool with count nodes: auto_scale off
// (DOKS's managed autoscaler leaves it alone), tagged as this autoscaler's
// with min 0 and the configured max, so it is a node group in either
// selection mode. The new group is a node group at once, and stays one
// until a listing shows the pool (see reconcileCreationsLocked). A lost
// answer is not an error: the pool may exist, and the listings tell.
func (g *NodeGroup) create(count int) (*NodeGroup, error) {
	if g.planned == nil {
		return nil, cloudprovider.ErrAlreadyExist
	}
	if count < 1 || count > g.maxSize {
		return nil, fmt.Errorf("node group %s: cannot create a pool with %d nodes (1 to %d)", g.id, count, g.maxSize)
	}
	m := g.m
	if why := m.creationStopped(); why != "" {
		return nil, fmt.Errorf("%w: %s", cloudprovider.ErrCreationStopped, why)
	}
	name, err := poolName(m.autoprovisioning.namePrefix, g.id, m.poolNameTaken)
	if err != nil {
		return nil, err
	}
	req := &godo.KubernetesNodePoolCreateRequest{
		Name: name, Size: g.planned.Slug, Count: count,
		Tags: []string{TagAutoprovisioned, TagAutoscalerEnabled,
			fmt.Sprintf("%s%d", TagPrefixMinNodes, 0), fmt.Sprintf("%s%d", TagPrefixMaxNodes, g.maxSize)},
		Labels: maps.Clone(g.pool.Labels), Taints: slices.Clone(g.pool.Taints),
	}
	if cents := m.autoprovisioning.maxHourlyCostCents; cents > 0 {
		req.Tags = append(req.Tags, maxHourlyCostTag(cents))
	}
	predicted := *g.template.template
	predicted.Name = name
	klog.InfoS("Creating node pool", "name", name, "size", req.Size, "count", count, "group", g.id, "labels", req.Labels, "taints", req.Taints)
	sent := m.o.clock.Now()
	created, err := m.client.createNodePool(m.ctx, req)
	switch {
	case maybeApplied(err):
		klog.ErrorS(err, "Creating node pool: no clear answer; the pool counts as being created until a listing shows it (it is never sent again)",
			"name", name, "deadline", createListDeadline)
		asked := &godo.KubernetesNodePool{ID: name, Name: name, Size: req.Size, Count: count,
			Labels: req.Labels, Taints: req.Taints, Tags: req.Tags}
		return m.addCreated(asked, g.maxSize, &predicted, sent, false, true), nil
	case nameTaken(err):
		// No listing shows a pool of this name (poolName chose a free
		// one), yet DigitalOcean has one: a creation whose answer was
		// lost and that listings have not shown yet, by this process or
		// by the leader before it (a restart forgets what it sent). It is
		// that pool, adopted by name once listed: a second is never made.
		klog.InfoS("Creating node pool: DigitalOcean already has a pool of this name that no listing shows yet; taken for a creation whose answer was lost (maybe by a previous leader), it counts as being created until a listing shows it",
			"name", name, "deadline", createListDeadline, "answer", err)
		asked := &godo.KubernetesNodePool{ID: name, Name: name, Size: req.Size, Count: count,
			Labels: req.Labels, Taints: req.Taints, Tags: req.Tags}
		return m.addCreated(asked, g.maxSize, &predicted, sent, false, true), nil
	case err != nil:
		// At the droplet limit every size would get the same answer: the
		// core backs off every group, not only this option.
		return nil, m.dropletLimitError(fmt.Errorf("creating node pool %s (size %s, %d nodes): %w", name, req.Size, count, err))
	}
	untagged := !isAutoprovisioned(created)
	if untagged {
		klog.ErrorS(nil, "Created node pool is answered without the ownership tag: node pool creation stops", "name", created.Name,
			"id", created.ID, "tag", TagAutoprovisioned, "problem", untaggedProblem([]string{created.Name}))
	}
	return m.addCreated(created, g.maxSize, &predicted, sent, untagged, false), nil
}

// addCreated makes a node group of a pool just created (or of the request,
// named, when its answer was lost: pending) and records the creation until
// a listing shows the pool. Its template is the predicted one until a
// Refresh fetches the real one (its spec is left empty so that it is
// fetched) and compares the two.
func (m *manager) addCreated(p *godo.KubernetesNodePool, maxSize int, predicted *godo.KubernetesNodeTemplate, sent time.Time, untagged, pending bool) *NodeGroup {
	g := newNodeGroup(m, p, 0, maxSize, &templateEntry{template: predicted, fetchedAt: m.o.clock.Now()}, m.counter(p.ID), 0)
	g.gen = g.counter.store(p.Count)
	g.pending = pending
	m.mu.Lock()
	defer m.mu.Unlock()
	m.creating[p.Name] = &creation{group: g, sentAt: sent, untagged: untagged}
	if untagged && m.createStop == "" {
		m.createStop = untaggedProblem([]string{p.Name}) // at once, not from the next Refresh
	}
	m.created[p.Name] = true
	if !pending {
		m.predicted[p.ID] = predicted
	}
	m.groups = append(m.groups, g)
	m.templates[p.ID] = g.template
	m.addNodesLocked(g, p)
	return g
}

// addNodesLocked indexes the pool's nodes as the group's.
func (m *manager) addNodesLocked(g *NodeGroup, p *godo.KubernetesNodePool) {
	indexNodes(m.groupByInstance, m.groupByNodeID, m.sizeByInstance, g, p)
}

// indexNodes records the pool's nodes as the group's in the maps by
// provider ID, by DOKS node ID and (sizes) by provider ID.
func indexNodes(byInstance, byNodeID map[string]*NodeGroup, sizes map[string]string, g *NodeGroup, p *godo.KubernetesNodePool) {
	for _, n := range p.Nodes {
		if n != nil {
			byInstance[instanceID(n)] = g
			if n.ID != "" {
				byNodeID[n.ID] = g
			}
			sizes[instanceID(n)] = p.Size
		}
	}
}

// reconcileCreationsLocked ends the creations the listing shows by name
// (the listed pool is from now on what selectPool makes of it) and those
// past createListDeadline (creation then pauses); it returns the groups of
// the others, which stay node groups, and the problems of creation: pools
// created with TagAutoprovisioned that DigitalOcean shows without it, and
// a creation never listed. m.mu is held.
func (m *manager) reconcileCreationsLocked(pools []*godo.KubernetesNodePool, now time.Time) (kept []*NodeGroup, problems []string) {
	listed := make(map[string]*godo.KubernetesNodePool, len(pools))
	for _, p := range pools {
		if p != nil {
			listed[p.Name] = p
		}
	}
	var untagged []string
	for _, name := range slices.Sorted(maps.Keys(m.creating)) {
		c := m.creating[name]
		switch p := listed[name]; {
		case p != nil:
			delete(m.creating, name)
			klog.V(2).InfoS("Created node pool is listed", "name", name, "id", p.ID, "afterSending", now.Sub(c.sentAt).Round(time.Second))
		case now.Sub(c.sentAt) >= createListDeadline:
			delete(m.creating, name)
			delete(m.created, name)
			m.createResume = now.Add(m.createPause)
			m.createMissed = fmt.Sprintf("node pool %s, whose creation was sent at %s, is not listed %s later: the creation was lost, or DigitalOcean's listing lags; "+
				"its nodes no longer count as upcoming and node pool creation is stopped until %s",
				name, c.sentAt.UTC().Format(time.RFC3339), createListDeadline, m.createResume.UTC().Format(time.RFC3339))
			klog.ErrorS(nil, "Node pool creation not listed in time", "name", name, "deadline", createListDeadline, "creationStoppedUntil", m.createResume)
		default:
			if c.untagged {
				untagged = append(untagged, name)
			}
			if !m.deleted[c.group.id] {
				kept = append(kept, c.group)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.created)) {
		p := listed[name]
		switch {
		case p == nil && m.creating[name] == nil:
			delete(m.created, name) // gone (deleted, or never made)
		case p != nil && !isAutoprovisioned(p):
			untagged = append(untagged, name)
		}
	}
	if len(untagged) > 0 {
		problems = append(problems, untaggedProblem(untagged))
	}
	if m.createMissed != "" && now.Before(m.createResume) {
		problems = append(problems, m.createMissed)
	}
	return kept, problems
}

// untaggedProblem explains pools this autoscaler created with
// TagAutoprovisioned that DigitalOcean answers or lists without it.
func untaggedProblem(names []string) string {
	return fmt.Sprintf("node pools %s were created by this autoscaler with the tag %s but DigitalOcean shows them without it: "+
		"the DigitalOcean API token most likely lacks the tag:read scope (without it pools are shown without their tags) or tag:create (to tag a resource as it is created); "+
		"a created pool this autoscaler cannot recognise as its own is never a node group, never scaled down nor deleted, so node pool creation is stopped: give the token tag:read and tag:create",
		strings.Join(names, ", "), TagAutoprovisioned)
}

// creationStopped says why node pools are not created now; "" when they
// may be.
func (m *manager) creationStopped() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.createStop != "" {
		return m.createStop
	}
	if now := m.o.clock.Now(); m.createMissed != "" && now.Before(m.createResume) {
		return m.createMissed
	}
	return ""
}

// checkCreation is nil when node pools may be created, else an error
// wrapping cloudprovider.ErrCreationStopped that says why.
func (m *manager) checkCreation() error {
	if why := m.creationStopped(); why != "" {
		return fmt.Errorf("%w: %s", cloudprovider.ErrCreationStopped, why)
	}
	return nil
}

// nameTaken tells DigitalOcean's refusal of a pool name already used in the
// cluster: a 422 saying the name "already exists" (the simulator's words;
// DigitalOcean's are not documented, and whether it refuses a second pool
// of the same name at all is not known: docs/autoprovisioning.md).
func nameTaken(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity &&
		strings.Contains(strings.ToLower(ae.Message), "already exists")
}
