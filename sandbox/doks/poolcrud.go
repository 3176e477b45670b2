package doks

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// createPoolRequest is the body of POST .../node_pools as DigitalOcean's API
// reference describes it (name, size and count required). Count is a
// pointer so that a missing count is told from zero.
type createPoolRequest struct {
	Name      string            `json:"name"`
	Size      string            `json:"size"`
	Count     *int              `json:"count"`
	Tags      []string          `json:"tags"`
	Labels    map[string]string `json:"labels"`
	Taints    []apiTaint        `json:"taints"`
	AutoScale bool              `json:"auto_scale"`
	MinNodes  int               `json:"min_nodes"`
	MaxNodes  int               `json:"max_nodes"`
}

// createdTaints are the taints of a pool created through the API: those
// asked for (the API's lower-case names; Go's decoder also takes godo's
// untagged Key/Value/Effect) and, on a GPU size, the vendor's GPU taint,
// which DOKS puts on GPU pools itself unless asked for already.
func createdTaints(req createPoolRequest) []godo.Taint {
	var out []godo.Taint
	for _, t := range req.Taints {
		out = append(out, godo.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	if vendor, _, count := SizeGPU(req.Size); count > 0 {
		key := string(gpuResourceName(vendor))
		if !slices.ContainsFunc(out, func(t godo.Taint) bool { return t.Key == key && t.Effect == string(apiv1.TaintEffectNoSchedule) }) {
			out = append(out, godo.Taint{Key: key, Effect: string(apiv1.TaintEffectNoSchedule)})
		}
	}
	return out
}

// defaultPoolTags are the tags DOKS puts on every pool.
func defaultPoolTags(clusterID string) []string {
	return []string{"k8s", "k8s:" + clusterID, "k8s-worker"}
}

// checkCreate applies DOKS's rules to a pool creation; the answer is the
// problem DigitalOcean's 422 would name, or "".
func (s *Server) checkCreateLocked(req createPoolRequest) string {
	switch {
	case req.Name == "":
		return "name is required"
	case len(validation.IsDNS1123Label(req.Name)) > 0:
		return fmt.Sprintf("name %q is invalid: must consist of lower case alphanumeric characters or '-', start and end with an alphanumeric character, and be at most 63 characters", req.Name)
	case s.poolByNameLocked(req.Name) != nil:
		return fmt.Sprintf("a node pool named %q already exists", req.Name)
	case req.Size == "":
		return "size is required"
	case req.Count == nil:
		return "count is required"
	case *req.Count < 1:
		return fmt.Sprintf("node count %d must be at least 1", *req.Count)
	}
	size, ok := lookupSize(req.Size)
	if !ok {
		return fmt.Sprintf("%s is not a valid size", req.Size)
	}
	if !slices.Contains(size.availableIn(), s.regionLocked()) {
		return fmt.Sprintf("size %s is not available in region %s", req.Size, s.regionLocked())
	}
	if req.AutoScale {
		if err := checkBounds(*req.Count, req.MinNodes, req.MaxNodes); err != nil {
			return err.Error()
		}
	}
	for _, t := range req.Taints {
		switch apiv1.TaintEffect(t.Effect) {
		case apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute:
		default:
			return fmt.Sprintf("taint %s: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
		}
	}
	for _, tag := range req.Tags {
		if tag == "" || len(tag) > 255 || strings.Trim(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_") != "" {
			return fmt.Sprintf("tag %q is invalid: tags are letters, digits, colons, dashes and underscores, at most 255", tag)
		}
	}
	return ""
}

func (s *Server) regionLocked() string {
	if s.opts.Region == "" {
		return DefaultRegion
	}
	return s.opts.Region
}

// handleCreatePool serves POST .../node_pools: 201 with the new pool, its
// nodes provisioning; 422 for what DigitalOcean refuses.
func (s *Server) handleCreatePool(w http.ResponseWriter, r *http.Request, reqID string) {
	var req createPoolRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "invalid JSON body: "+err.Error(), reqID)
		return
	}
	s.mu.Lock()
	problem := s.checkCreateLocked(req)
	if problem == "" && s.refuseForStockLocked(req.Size, *req.Count) {
		problem = SizeUnavailableMessage
	}
	if problem == "" && s.dropletsOverLimitLocked(*req.Count) {
		problem = DropletLimitMessage
	}
	if problem != "" {
		s.mu.Unlock()
		klog.V(2).Infof("doks simulator: creation of pool %q refused: %s", req.Name, problem)
		writeError(w, http.StatusUnprocessableEntity, "unprocessable_entity", problem, reqID)
		return
	}
	p := &pool{
		id: string(uuid.NewUUID()), name: req.Name, size: req.Size, autoScale: req.AutoScale,
		labels: copyLabels(req.Labels), taints: createdTaints(req),
		listedFrom: time.Now().Add(s.opts.ListLag),
	}
	// DOKS adds its own tags to the ones asked for.
	p.tags = append([]string(nil), req.Tags...)
	for _, t := range defaultPoolTags(s.opts.ClusterID) {
		if !slices.Contains(p.tags, t) {
			p.tags = append(p.tags, t)
		}
	}
	if req.AutoScale {
		p.minNodes, p.maxNodes = req.MinNodes, req.MaxNodes
	}
	s.pools = append(s.pools, p)
	s.recordLocked(p, true)
	s.resizeLocked(p, *req.Count)
	out := p.toGodo()
	s.notifyLocked()
	s.mu.Unlock()
	klog.V(2).Infof("doks simulator: created pool %s (%s) size %s count %d through the API", p.name, p.id, p.size, *req.Count)
	writeJSON(w, http.StatusCreated, struct {
		NodePool apiPool `json:"node_pool"`
	}{toAPIPool(out, s.tagsVisible(r))})
}

// handleDeletePool serves DELETE .../node_pools/{pool}: 204, then, as DOKS
// does, the pool's nodes are drained and deleted. Its droplets stay
// (draining, then deleting) until DeleteDelay has passed, so the node agent
// sees them go; the pool stays listed with them, count 0, unless
// DeletedPoolsVanish. A second DELETE answers 404.
func (s *Server) handleDeletePool(w http.ResponseWriter, r *http.Request, reqID string) {
	s.mu.Lock()
	p := s.poolByIDLocked(r.PathValue("pool"))
	if p == nil || p.deleting {
		s.mu.Unlock()
		notFound(w, reqID)
		return
	}
	p.deleting = true
	p.life.Deleted = time.Now()
	p.count = 0
	for _, n := range p.activeNodes() {
		s.startDeletionLocked(p, n, false)
	}
	s.dropIfGoneLocked(p)
	s.notifyLocked()
	s.mu.Unlock()
	klog.V(2).Infof("doks simulator: deleting pool %s (%s); its nodes are drained and deleted", p.name, p.id)
	w.WriteHeader(http.StatusNoContent)
}

// dropIfGoneLocked forgets a deleted pool once its last droplet is gone.
func (s *Server) dropIfGoneLocked(p *pool) {
	if !p.deleting || len(p.nodes) > 0 {
		return
	}
	s.pools = slices.DeleteFunc(s.pools, func(q *pool) bool { return q == p })
	p.life.Gone = time.Now()
}

// PoolLife is one pool's history: when it was created, when a DELETE of it
// was accepted and when its last node went. A chaos run reads it to tell the
// pools created from the pools needed and to find pools left behind.
type PoolLife struct {
	ID, Name, Size string
	Labels         map[string]string
	Tags           []string
	// ByAPI: created through POST node_pools, not CreatePool.
	ByAPI bool
	// Created, Deleted and Gone are zero until they happen.
	Created, Deleted, Gone time.Time
}

// PoolHistory returns every pool the simulator has held, in creation order,
// the gone ones included.
func (s *Server) PoolHistory() []PoolLife {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PoolLife, 0, len(s.history))
	for _, l := range s.history {
		c := *l
		c.Labels = copyLabels(l.Labels)
		c.Tags = slices.Clone(l.Tags)
		out = append(out, c)
	}
	return out
}

func (s *Server) recordLocked(p *pool, byAPI bool) {
	p.life = &PoolLife{ID: p.id, Name: p.name, Size: p.size, Labels: copyLabels(p.labels),
		Tags: slices.Clone(p.tags), ByAPI: byAPI, Created: time.Now()}
	s.history = append(s.history, p.life)
}

// listedLocked reports whether the API shows the pool.
func (s *Server) listedLocked(p *pool) bool {
	return !p.deleting || !s.opts.DeletedPoolsVanish
}

// listedPoolsLocked are the pools the API shows.
func (s *Server) listedPoolsLocked() []*pool {
	out := make([]*pool, 0, len(s.pools))
	for _, p := range s.pools {
		if s.listedLocked(p) {
			out = append(out, p)
		}
	}
	return out
}

// apiListedPoolsLocked are the pools the API's listings show at now: the
// listed pools without those created within ListLag.
func (s *Server) apiListedPoolsLocked(now time.Time) []*pool {
	return slices.DeleteFunc(s.listedPoolsLocked(), func(p *pool) bool { return now.Before(p.listedFrom) })
}

// ListedPools returns deep copies of the pools the API lists, in creation
// order: Pools, without those being deleted when DeletedPoolsVanish.
func (s *Server) ListedPools() []godo.KubernetesNodePool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []godo.KubernetesNodePool
	for _, p := range s.listedPoolsLocked() {
		out = append(out, p.toGodo())
	}
	return out
}
