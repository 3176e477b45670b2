package doks

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"
)

// Paging limits of the DigitalOcean API.
const (
	defaultPerPage = 20
	maxPerPage     = 200
)

// The JSON shapes below follow the DigitalOcean API rather than godo's Go
// structs: taints use lower-case keys and min/max are always present.
type apiTaint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

type apiPool struct {
	ID        string                 `json:"id"`
	Name      string                 `json:"name"`
	Size      string                 `json:"size"`
	Count     int                    `json:"count"`
	Tags      []string               `json:"tags"`
	Labels    map[string]string      `json:"labels"`
	Taints    []apiTaint             `json:"taints"`
	AutoScale bool                   `json:"auto_scale"`
	MinNodes  int                    `json:"min_nodes"`
	MaxNodes  int                    `json:"max_nodes"`
	Nodes     []*godo.KubernetesNode `json:"nodes"`
}

type apiLinks struct {
	Pages *godo.Pages `json:"pages,omitempty"`
}

type apiMeta struct {
	Total int `json:"total"`
}

type apiError struct {
	ID        string `json:"id"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

// toAPIPool renders a pool; without tag:read (tags false) its tags are
// left out, as DigitalOcean leaves them out.
func toAPIPool(p godo.KubernetesNodePool, tags bool) apiPool {
	if !tags {
		p.Tags = nil
	}
	out := apiPool{ID: p.ID, Name: p.Name, Size: p.Size, Count: p.Count, Tags: p.Tags,
		Labels: p.Labels, AutoScale: p.AutoScale, MinNodes: p.MinNodes, MaxNodes: p.MaxNodes,
		Nodes: p.Nodes, Taints: []apiTaint{}}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Nodes == nil {
		out.Nodes = []*godo.KubernetesNode{}
	}
	for _, t := range p.Taints {
		out.Taints = append(out.Taints, apiTaint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	const clusters = "/v2/kubernetes/clusters/{cluster}"
	mux.Handle("GET "+clusters, s.wrap(OpGetCluster, s.handleGetCluster))
	mux.Handle("GET "+clusters+"/node_pools", s.wrap(OpListNodePools, s.handleListPools))
	mux.Handle("GET "+clusters+"/node_pools/{pool}", s.wrap(OpGetNodePool, s.handleGetPool))
	mux.Handle("PUT "+clusters+"/node_pools/{pool}", s.wrap(OpUpdateNodePool, s.handleUpdatePool))
	mux.Handle("POST "+clusters+"/node_pools", s.wrap(OpCreateNodePool, s.handleCreatePool))
	mux.Handle("DELETE "+clusters+"/node_pools/{pool}", s.wrap(OpDeleteNodePool, s.handleDeletePool))
	mux.Handle("DELETE "+clusters+"/node_pools/{pool}/nodes/{node}", s.wrap(OpDeleteNode, s.handleDeleteNode))
	mux.Handle("GET "+clusters+"/node_pools_template/{name}", s.wrap(OpGetNodePoolTemplate, s.handleTemplate))
	mux.Handle("GET /v2/sizes", s.wrap(OpListSizes, s.handleSizes))
	mux.Handle("GET /v2/account", s.wrap(OpGetAccount, s.handleGetAccount))
	mux.Handle("GET /v2/droplets", s.wrap(OpListDroplets, s.handleListDroplets))
	mux.Handle("/", s.wrap(OpUnknown, func(w http.ResponseWriter, r *http.Request, reqID string) {
		writeError(w, http.StatusNotFound, "not_found", "The resource you were accessing could not be found.", reqID)
	}))
	return mux
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, reqID string)

// wrap counts the request, applies the rate limit, the token check and any
// injected fault, then runs h. Rate-limit headers go on every response.
func (s *Server) wrap(op string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := string(uuid.NewUUID())
		w.Header().Set("x-request-id", reqID)
		now := time.Now()

		s.mu.Lock()
		s.counts[op]++
		s.total++
		if r.Method != http.MethodGet {
			s.changes = append(s.changes, Change{Op: op, Pool: r.PathValue("pool"), Node: r.PathValue("node")})
		}
		limited, retryAfter := s.takeRateLimitLocked(now, w.Header())
		if limited {
			s.limited[op]++
		}
		var fault *Fault
		token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		authorized := len(s.tokens) == 0 || (bearer && s.tokens[token])
		if authorized && !limited {
			fault = s.matchFaultLocked(op)
		}
		s.mu.Unlock()

		switch {
		case !authorized:
			klog.V(4).Infof("doks simulator: %s %s: unauthorized", r.Method, r.URL.Path)
			writeError(w, http.StatusUnauthorized, "Unauthorized", "Unable to authenticate you", reqID)
			return
		case limited:
			if retryAfter > 0 {
				w.Header().Set("retry-after", strconv.Itoa(retryAfter))
			}
			writeError(w, http.StatusTooManyRequests, "too_many_requests", "API Rate limit exceeded.", reqID)
			return
		}
		if fault != nil {
			if fault.Latency > 0 {
				select {
				case <-time.After(fault.Latency):
				case <-r.Context().Done():
					return
				}
			}
			if fault.Applied && (fault.Status != 0 || fault.Cut) {
				// The write happens; its answer goes nowhere.
				h(discardResponse{header: http.Header{}}, r, reqID)
			}
			if fault.Cut {
				klog.V(4).Infof("doks simulator: %s %s: injected cut connection (applied %v)", r.Method, r.URL.Path, fault.Applied)
				panic(http.ErrAbortHandler) // net/http closes the connection unanswered
			}
			if fault.Status != 0 {
				if fault.RetryAfter > 0 {
					w.Header().Set("retry-after", strconv.Itoa(int(math.Ceil(fault.RetryAfter.Seconds()))))
				}
				msg := fault.Message
				if msg == "" {
					msg = http.StatusText(fault.Status)
				}
				klog.V(4).Infof("doks simulator: %s %s: injected %d (applied %v)", r.Method, r.URL.Path, fault.Status, fault.Applied)
				writeError(w, fault.Status, errorID(fault.Status), msg, reqID)
				return
			}
		}
		if fault != nil && fault.ReplaceBody {
			rw := &replacedBody{ResponseWriter: w}
			defer func() {
				klog.V(4).Infof("doks simulator: %s %s: injected %d with the body %q", r.Method, r.URL.Path, rw.statusOr200(), fault.Body)
				rw.finish(fault.Body)
			}()
			w = rw
		}
		if c := r.PathValue("cluster"); c != "" && c != s.opts.ClusterID {
			writeError(w, http.StatusNotFound, "not_found", "The resource you were accessing could not be found.", reqID)
			return
		}
		h(w, r, reqID)
	})
}

// replacedBody keeps the status and headers a handler answers with and
// drops its body, for finish to send another (Fault.ReplaceBody).
type replacedBody struct {
	http.ResponseWriter
	status int
}

func (b *replacedBody) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *replacedBody) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return len(p), nil
}

func (b *replacedBody) statusOr200() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

func (b *replacedBody) finish(body string) {
	b.ResponseWriter.Header().Set("Content-Length", strconv.Itoa(len(body)))
	b.ResponseWriter.WriteHeader(b.statusOr200())
	if _, err := io.WriteString(b.ResponseWriter, body); err != nil {
		klog.V(4).Infof("doks simulator: write response: %v", err)
	}
}

// discardResponse takes the answer of a request whose answer a fault loses.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}

// takeRateLimitLocked records the request in the sliding one-hour window
// and writes the rate-limit headers, which describe the hourly budget. Over
// either limit the request is not counted and the caller answers 429; as
// DigitalOcean does, only a per-minute refusal says when to come back
// (retryAfter seconds), an hourly one leaves that to ratelimit-reset.
func (s *Server) takeRateLimitLocked(now time.Time, h http.Header) (limited bool, retryAfter int) {
	hourAgo, minuteAgo := now.Add(-time.Hour), now.Add(-time.Minute)
	i := 0
	for i < len(s.window) && !s.window[i].After(hourAgo) {
		i++
	}
	s.window = s.window[i:]
	inLastMinute := len(s.window) - sort.Search(len(s.window), func(i int) bool { return s.window[i].After(minuteAgo) })
	switch {
	case len(s.window) >= s.rateLimit:
		limited = true
	case inLastMinute >= s.minuteLimit:
		limited = true
		oldest := s.window[len(s.window)-inLastMinute]
		retryAfter = max(1, int(math.Ceil(oldest.Add(time.Minute).Sub(now).Seconds())))
	default:
		s.window = append(s.window, now)
	}
	remaining := max(0, s.rateLimit-len(s.window))
	reset := now.Add(time.Hour)
	if len(s.window) > 0 {
		reset = s.window[0].Add(time.Hour)
	}
	h.Set("ratelimit-limit", strconv.Itoa(s.rateLimit))
	h.Set("ratelimit-remaining", strconv.Itoa(remaining))
	h.Set("ratelimit-reset", strconv.FormatInt(reset.Unix(), 10))
	return limited, retryAfter
}

func (s *Server) matchFaultLocked(op string) *Fault {
	for i, f := range s.faults {
		if f.Operation != "" && f.Operation != op {
			continue
		}
		if f.draws != nil && f.draws.Float64() >= f.Fraction {
			continue
		}
		s.faulted[op]++
		applied := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return &applied
	}
	return nil
}

func errorID(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusUnprocessableEntity:
		return "unprocessable_entity"
	case http.StatusTooManyRequests:
		return "too_many_requests"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	}
	if status >= 500 {
		return "server_error"
	}
	return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.V(4).Infof("doks simulator: write response: %v", err)
	}
}

func writeError(w http.ResponseWriter, status int, id, msg, reqID string) {
	writeJSON(w, status, apiError{ID: id, Message: msg, RequestID: reqID})
}

func notFound(w http.ResponseWriter, reqID string) {
	writeError(w, http.StatusNotFound, "not_found", "The resource you were accessing could not be found.", reqID)
}

// paging reads page and per_page the way the API does: defaults for absent
// or invalid values, per_page capped at 200.
func paging(r *http.Request) (page, perPage int) {
	page, perPage = 1, defaultPerPage
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v >= 1 {
		page = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v >= 1 {
		perPage = v
	}
	if perPage > maxPerPage {
		perPage = maxPerPage
	}
	return page, perPage
}

// pageBounds returns the slice bounds of a page and its links.
func pageBounds(r *http.Request, total, page, perPage int) (lo, hi int, links apiLinks) {
	lo = (page - 1) * perPage
	if lo > total {
		lo = total
	}
	hi = lo + perPage
	if hi > total {
		hi = total
	}
	last := (total + perPage - 1) / perPage
	if last < 1 {
		last = 1
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	link := func(p int) string {
		q := url.Values{}
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		return fmt.Sprintf("%s://%s%s?%s", scheme, r.Host, r.URL.Path, q.Encode())
	}
	pages := &godo.Pages{}
	if page > 1 {
		pages.First = link(1)
		pages.Prev = link(min(page-1, last))
	}
	if page < last {
		pages.Next = link(page + 1)
		pages.Last = link(last)
	}
	if *pages != (godo.Pages{}) {
		links.Pages = pages
	}
	return lo, hi, links
}

func (s *Server) handleListPools(w http.ResponseWriter, r *http.Request, _ string) {
	tags := s.tagsVisible(r)
	s.mu.Lock()
	var pools []godo.KubernetesNodePool
	for _, p := range s.apiListedPoolsLocked(time.Now()) {
		pools = append(pools, p.toGodo())
	}
	s.mu.Unlock()
	page, perPage := paging(r)
	lo, hi, links := pageBounds(r, len(pools), page, perPage)
	out := make([]apiPool, 0, hi-lo)
	for _, p := range pools[lo:hi] {
		out = append(out, toAPIPool(p, tags))
	}
	writeJSON(w, http.StatusOK, struct {
		NodePools []apiPool `json:"node_pools"`
		Links     apiLinks  `json:"links"`
		Meta      apiMeta   `json:"meta"`
	}{out, links, apiMeta{Total: len(pools)}})
}

func (s *Server) poolCopy(id string) (godo.KubernetesNodePool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.poolByIDLocked(id)
	if p == nil || !s.listedLocked(p) {
		return godo.KubernetesNodePool{}, false
	}
	return p.toGodo(), true
}

// handleGetCluster answers with the parts of the cluster object a
// cluster autoscaler reads: its identity, pools and autoscaler settings.
func (s *Server) handleGetCluster(w http.ResponseWriter, r *http.Request, _ string) {
	tags := s.tagsVisible(r)
	s.mu.Lock()
	region := s.opts.Region
	if region == "" {
		region = DefaultRegion
	}
	c := godo.KubernetesCluster{ID: s.opts.ClusterID, Name: "sandbox", RegionSlug: region, VersionSlug: VersionSlug,
		Status: &godo.KubernetesClusterStatus{State: godo.KubernetesClusterStatusRunning}}
	if s.caConfig != nil {
		cp := *s.caConfig
		c.ClusterAutoscalerConfiguration = &cp
	}
	var pools []apiPool
	for _, p := range s.apiListedPoolsLocked(time.Now()) {
		pools = append(pools, toAPIPool(p.toGodo(), tags))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Cluster clusterWithPools `json:"kubernetes_cluster"`
	}{clusterWithPools{c, pools}})
}

// VersionSlug is the simulated cluster's DOKS version, in DOKS's form
// (Kubernetes version, "-do.", DigitalOcean's revision), matching the
// sandbox's control plane.
const VersionSlug = "1.37.2-do.0"

// clusterWithPools replaces godo's pool type in the cluster object with the
// simulator's, which carries every field the real API sends.
type clusterWithPools struct {
	godo.KubernetesCluster
	NodePools []apiPool `json:"node_pools"`
}

func (s *Server) handleGetPool(w http.ResponseWriter, r *http.Request, reqID string) {
	p, ok := s.poolCopy(r.PathValue("pool"))
	if !ok {
		notFound(w, reqID)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		NodePool apiPool `json:"node_pool"`
	}{toAPIPool(p, s.tagsVisible(r))})
}

func (s *Server) handleUpdatePool(w http.ResponseWriter, r *http.Request, reqID string) {
	var req godo.KubernetesNodePoolUpdateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "invalid JSON body: "+err.Error(), reqID)
		return
	}
	s.mu.Lock()
	p := s.poolByIDLocked(r.PathValue("pool"))
	if p == nil || p.deleting {
		s.mu.Unlock()
		notFound(w, reqID)
		return
	}
	// Validate the whole request against the pool as it would be after
	// the update, then apply it, so a rejected request changes nothing.
	name, autoScale, minN, maxN, count := p.name, p.autoScale, p.minNodes, p.maxNodes, p.count
	if req.Name != "" {
		name = req.Name
	}
	if req.AutoScale != nil {
		autoScale = *req.AutoScale
	}
	if req.MinNodes != nil {
		minN = *req.MinNodes
	}
	if req.MaxNodes != nil {
		maxN = *req.MaxNodes
	}
	if req.Count != nil {
		count = *req.Count
	}
	var problem string
	boundsErr := checkBounds(count, minN, maxN)
	switch {
	case count < 0:
		problem = fmt.Sprintf("node count %d must not be negative", count)
	case name != p.name && s.poolByNameLocked(name) != nil:
		problem = fmt.Sprintf("a node pool named %q already exists", name)
	case autoScale && boundsErr != nil:
		problem = boundsErr.Error()
	case s.refuseForStockLocked(p.size, count-len(p.activeNodes())):
		problem = SizeUnavailableMessage
	case s.dropletsOverLimitLocked(count - len(p.activeNodes())):
		problem = DropletLimitMessage
	}
	if problem != "" {
		s.mu.Unlock()
		klog.V(2).Infof("doks simulator: update of pool %s refused: %s", p.id, problem)
		writeError(w, http.StatusUnprocessableEntity, "unprocessable_entity", problem, reqID)
		return
	}
	p.name, p.autoScale = name, autoScale
	if autoScale {
		p.minNodes, p.maxNodes = minN, maxN
	} else {
		p.minNodes, p.maxNodes = 0, 0
	}
	if req.Labels != nil {
		p.labels = copyLabels(req.Labels)
	}
	if req.Taints != nil {
		p.taints = append([]godo.Taint{}, (*req.Taints)...)
	}
	if req.Tags != nil {
		p.tags = append([]string{}, req.Tags...)
	}
	if count != p.count {
		klog.V(2).Infof("doks simulator: pool %s (%s) count %d → %d", p.name, p.id, p.count, count)
	}
	s.resizeLocked(p, count)
	out := p.toGodo()
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, struct {
		NodePool apiPool `json:"node_pool"`
	}{toAPIPool(out, s.tagsVisible(r))})
}

func queryFlag(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "1" || strings.EqualFold(v, "true")
}

func (s *Server) handleDeleteNode(w http.ResponseWriter, r *http.Request, reqID string) {
	skipDrain, replace := queryFlag(r, "skip_drain"), queryFlag(r, "replace")
	s.mu.Lock()
	p := s.poolByIDLocked(r.PathValue("pool"))
	var n *node
	if p != nil && !p.deleting {
		n = p.nodeByID(r.PathValue("node"))
	}
	if n == nil {
		s.mu.Unlock()
		notFound(w, reqID)
		return
	}
	if st := n.Status.State; st == StateDraining || st == StateDeleting {
		// Already on its way out: accepted again, nothing changes.
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !replace && p.autoScale && p.count-1 < p.minNodes {
		s.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity, "unprocessable_entity",
			fmt.Sprintf("deleting the node would take the pool below its minimum of %d nodes", p.minNodes), reqID)
		return
	}
	s.startDeletionLocked(p, n, skipDrain)
	if replace {
		p.nodes = append(p.nodes, s.newNodeLocked(p, StateProvisioning))
	} else if p.count > 0 {
		p.count--
	}
	klog.V(2).Infof("doks simulator: deleting node %s of pool %s (skip_drain=%v replace=%v); count now %d",
		n.Name, p.name, skipDrain, replace, p.count)
	s.notifyLocked()
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) handleTemplate(w http.ResponseWriter, r *http.Request, reqID string) {
	s.mu.Lock()
	p := s.poolByNameLocked(r.PathValue("name"))
	var tmpl *godo.KubernetesNodeTemplate
	if p != nil {
		if size, ok := lookupSize(p.size); ok {
			tmpl = size.template(s.opts.ClusterID, p.name, p.labels, p.taints)
		}
	}
	s.mu.Unlock()
	if tmpl == nil {
		notFound(w, reqID)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Template *godo.KubernetesNodeTemplate `json:"template"`
	}{tmpl})
}

func (s *Server) handleSizes(w http.ResponseWriter, r *http.Request, _ string) {
	page, perPage := paging(r)
	lo, hi, links := pageBounds(r, len(catalogue), page, perPage)
	out := make([]godo.Size, 0, hi-lo)
	s.mu.Lock()
	for _, sz := range catalogue[lo:hi] {
		g := sz.godoSize()
		g.Available = !s.notAvailable[sz.slug]
		out = append(out, g)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Sizes []godo.Size `json:"sizes"`
		Links apiLinks    `json:"links"`
		Meta  apiMeta     `json:"meta"`
	}{out, links, apiMeta{Total: len(catalogue)}})
}
