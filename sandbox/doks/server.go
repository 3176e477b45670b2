// Package doks is a DOKS API simulator: an HTTP server that answers the
// DigitalOcean Kubernetes node-pool, node-pool-template and sizes endpoints
// with godo-compatible JSON, keeps node pools and their nodes in memory, moves
// nodes through provisioning → running and draining/deleting → gone on
// timers, sends DigitalOcean's rate-limit headers, counts requests per
// operation and injects faults. The sandbox and the provider's tests use it in
// place of api.digitalocean.com.
package doks

import (
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"
)

// Operation names used by RequestCount and Fault.Operation.
const (
	OpListNodePools       = "ListNodePools"
	OpGetNodePool         = "GetNodePool"
	OpUpdateNodePool      = "UpdateNodePool"
	OpCreateNodePool      = "CreateNodePool"
	OpDeleteNodePool      = "DeleteNodePool"
	OpDeleteNode          = "DeleteNode"
	OpGetNodePoolTemplate = "GetNodePoolTemplate"
	OpListSizes           = "ListSizes"
	OpGetCluster          = "GetCluster"
	// OpUnknown counts requests to paths the simulator does not serve.
	OpUnknown = "Unknown"
)

// Node states as DOKS reports them.
const (
	StateProvisioning = "provisioning"
	StateRunning      = "running"
	StateDraining     = "draining"
	StateDeleting     = "deleting"
)

// DefaultRateLimit is DigitalOcean's per-token hourly request budget.
const DefaultRateLimit = 5000

// DefaultMinuteLimit is DigitalOcean's per-token burst limit: requests in
// any 60 seconds.
const DefaultMinuteLimit = 250

// DefaultRegion is the simulated cluster's region unless Options say.
const DefaultRegion = "nyc1"

// Options configure a simulator.
type Options struct {
	ClusterID string
	// Token is the bearer token required on every request; empty accepts any.
	Token string
	// BootDelay: provisioning → running. 0 makes new nodes running at once;
	// a negative value leaves them provisioning until SetNodeState.
	BootDelay time.Duration
	// DeleteDelay: draining/deleting → gone. 0 removes deleted nodes at
	// once; a negative value leaves them deleting forever.
	DeleteDelay time.Duration
	// Region is the cluster's region_slug; DefaultRegion when empty.
	Region string
	// DropletLimit is the account's droplet limit (DigitalOcean's default
	// is DefaultDropletLimit); 0 means no limit. SetDropletLimit changes it.
	DropletLimit int
	// ListLag keeps a pool created through the API out of the API's
	// listings (the pool list and the cluster object) for this long, as an
	// eventually consistent listing lags a create; SetListLag changes it.
	ListLag time.Duration
	// DeletedPoolsVanish makes a deleted pool leave the API at once (404
	// on GET, absent from listings) while its droplets drain and go.
	// Without it the pool stays listed, count 0, its nodes draining then
	// deleting, until its last node is gone: what DigitalOcean's own
	// Terraform provider expects, which after a DELETE polls GET of the
	// pool until it answers 404. Which one DOKS does is not documented;
	// the autoscaler must cope with both.
	DeletedPoolsVanish bool
}

// DefaultDropletLimit is the droplet limit of a new DigitalOcean account.
const DefaultDropletLimit = 25

// DropletLimitMessage is DigitalOcean's answer (422 unprocessable_entity) to
// a request that would take the account over its droplet limit.
const DropletLimitMessage = "creating this/these droplet(s) will exceed your droplet limit"

// PoolSpec describes a node pool created with CreatePool.
type PoolSpec struct {
	Name, Size string
	Count      int
	AutoScale  bool
	MinNodes   int
	MaxNodes   int
	Labels     map[string]string
	Taints     []godo.Taint
	Tags       []string
}

// Fault makes matching requests fail or slow down.
type Fault struct {
	// Operation limits the fault to one operation; "" matches every one.
	Operation string
	// Status is the HTTP status to answer with; 0 only adds Latency (and
	// ReplaceBody).
	Status int
	// Times is how many requests the fault applies to; 0 means until
	// ClearFaults.
	Times int
	// RetryAfter, when set, is sent as the retry-after header (seconds).
	RetryAfter time.Duration
	// Latency delays the answer.
	Latency time.Duration
	// Message is the error message in the JSON body.
	Message string
	// Applied carries the request out before the fault answers: the
	// write happens and its answer is lost, as behind a load balancer that
	// answers 504 after the backend acted. Without it a fault with a
	// Status refuses the request unapplied.
	Applied bool
	// Cut closes the connection without an answer (after applying the
	// request when Applied is set) instead of answering Status.
	Cut bool
	// ReplaceBody carries the request out and answers with the
	// operation's own status and headers (201 for a create, 202 for an
	// update) but with Body in place of its body: "{}" or an empty Body
	// is a 2xx that holds no pool, as from a proxy that drops or
	// rewrites a good answer's body. A refused request keeps its 4xx
	// status and loses its body too. Ignored when Status or Cut is set.
	ReplaceBody bool
	Body        string
	// Fraction, between 0 and 1 exclusive, applies the fault to about that
	// share of the matching requests only; the others go on to the next
	// fault. Which ones is drawn from a generator seeded with Seed, so a
	// run that sends the same requests in the same order meets the same
	// faults. Times counts only the requests the fault applied to.
	Fraction float64
	Seed     uint64

	draws *mrand.Rand // Fraction's generator, set by InjectFault
}

type pool struct {
	id, name, size string
	count          int
	autoScale      bool
	minNodes       int
	maxNodes       int
	labels         map[string]string
	taints         []godo.Taint
	tags           []string
	nodes          []*node // creation order
	// deleting: DeleteNodePool was accepted; its nodes drain and go, then
	// the pool is forgotten. Until then the API lists it, unless
	// DeletedPoolsVanish.
	deleting bool
	// listedFrom: the API's listings show the pool from then on (ListLag).
	listedFrom time.Time
	// life is the pool's entry in Server.history.
	life *PoolLife
}

type node struct {
	godo.KubernetesNode
	// epoch invalidates pending timers when the node's state is changed by
	// something else (SetNodeState, a delete) before they fire.
	epoch int
}

// Server is the simulator. All methods are safe for concurrent use.
type Server struct {
	opts    Options
	handler http.Handler

	mu          sync.Mutex
	pools       []*pool
	nextDroplet int64
	counts      map[string]int
	total       int
	limited     map[string]int // per operation, requests answered 429 by the rate limit (not injected faults)
	changes     []Change
	faults      []*Fault
	history     []*PoolLife    // every pool held, creation order
	faulted     map[string]int // per operation, requests an injected fault met
	rateLimit   int
	minuteLimit int
	// dropletLimit is the account's droplet limit; 0: none.
	dropletLimit int
	// otherDroplets are the account's droplets outside the cluster.
	otherDroplets int
	// outOfStock: size → until when it is out of stock; notAvailable:
	// sizes the Sizes API lists as not available; stockRefusals counts
	// the refusals per size (stock.go).
	outOfStock    map[string]time.Time
	notAvailable  map[string]bool
	stockRefusals map[string]int
	// noDropletRead are tokens without droplet:read (account.go).
	noDropletRead map[string]bool
	// tokens are the bearer tokens accepted (Options.Token, or SetTokens);
	// none accepts any.
	tokens map[string]bool
	// noTagRead are tokens created without the tag:read scope: the pools
	// they list carry no tags.
	noTagRead map[string]bool
	// caConfig is the cluster's cluster_autoscaler_configuration; nil sends none.
	caConfig *godo.KubernetesClusterAutoscalerConfiguration
	window   []time.Time // request times within the last hour, oldest first
	subs     map[int]chan struct{}
	nextSub  int
	timers   map[*time.Timer]struct{}
	closed   bool

	httpServer *http.Server
	listener   net.Listener
}

// NewServer returns a simulator with no pools.
func NewServer(opts Options) *Server {
	s := &Server{
		opts:         opts,
		nextDroplet:  400000000,
		counts:       map[string]int{},
		limited:      map[string]int{},
		faulted:      map[string]int{},
		rateLimit:    DefaultRateLimit,
		minuteLimit:  DefaultMinuteLimit,
		dropletLimit: opts.DropletLimit,
		subs:         map[int]chan struct{}{},
		timers:       map[*time.Timer]struct{}{},
	}
	if opts.Token != "" {
		s.tokens = map[string]bool{opts.Token: true}
	}
	s.handler = s.routes()
	return s
}

// SetTokens replaces the accepted bearer tokens, as creating a new API
// token and revoking the old one does: during a rotation both are valid,
// afterwards only the new one. No token accepts any request.
func (s *Server) SetTokens(tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
	for _, t := range tokens {
		s.tokens[t] = true
	}
}

// Start serves HTTP on addr (e.g. "127.0.0.1:0") in the background.
func (s *Server) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("doks simulator: listen on %s: %w", addr, err)
	}
	s.mu.Lock()
	if s.listener != nil {
		s.mu.Unlock()
		l.Close()
		return errors.New("doks simulator: already started")
	}
	s.listener = l
	s.httpServer = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	srv := s.httpServer
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("doks simulator: serve: %v", err)
		}
	}()
	klog.Infof("doks simulator: serving cluster %s on %s", s.opts.ClusterID, s.URL())
	return nil
}

// URL is the base URL of a started server, with a trailing slash.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String() + "/"
}

// Handler serves the API, for use with httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the HTTP server (when started) and all node timers.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for t := range s.timers {
		t.Stop()
	}
	s.timers = map[*time.Timer]struct{}{}
	srv := s.httpServer
	s.mu.Unlock()
	if srv != nil {
		return srv.Close()
	}
	return nil
}

// SetRateLimit changes the hourly request budget (DefaultRateLimit at
// start), so tests can watch a client approach the limit.
func (s *Server) SetRateLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = limit
}

// SetMinuteLimit changes the per-minute request limit (DefaultMinuteLimit
// at start).
func (s *Server) SetMinuteLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.minuteLimit = limit
}

// SetListLag changes Options.ListLag for pools created from now on.
func (s *Server) SetListLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.ListLag = d
}

// EndListLag makes every pool listed now, as when the lag of the listing
// behind the creates is over.
func (s *Server) EndListLag() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		p.listedFrom = time.Time{}
	}
}

// SetTokenWithoutTagRead marks token as a custom-scoped token without
// DigitalOcean's tag:read scope: DigitalOcean's API specification says a
// node pool's tags "Require tag:read scope", so pools (listed, read, or in
// the cluster object) are answered without their tags for it.
func (s *Server) SetTokenWithoutTagRead(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noTagRead == nil {
		s.noTagRead = map[string]bool{}
	}
	s.noTagRead[token] = true
}

// tagsVisible reports whether the request's token may read tags.
func (s *Server) tagsVisible(r *http.Request) bool {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.noTagRead[token]
}

// SetDropletLimit changes the account's droplet limit (as a limit increase
// granted by DigitalOcean support would); 0 removes it. Droplets beyond a
// lowered limit stay; only new ones are refused.
func (s *Server) SetDropletLimit(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropletLimit = limit
}

// dropletsOverLimitLocked reports whether adding n droplets would take the
// account over its droplet limit. Every droplet counts (dropletsLocked),
// those still draining or deleting and those outside the cluster too, as
// DigitalOcean counts a droplet until it is destroyed. Pool creation checks it as well as pool resizes.
func (s *Server) dropletsOverLimitLocked(n int) bool {
	if s.dropletLimit <= 0 || n <= 0 {
		return false
	}
	return s.dropletsLocked()+n > s.dropletLimit
}

// SetClusterAutoscalerConfiguration sets what the cluster object reports as
// its cluster_autoscaler_configuration (as `doctl kubernetes cluster update
// --cluster-autoscaler-...` would); nil removes it.
func (s *Server) SetClusterAutoscalerConfiguration(c *godo.KubernetesClusterAutoscalerConfiguration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil {
		s.caConfig = nil
		return
	}
	cp := *c
	cp.Expanders = append([]string(nil), c.Expanders...)
	s.caConfig = &cp
}

// CreatePool adds a node pool whose Count nodes are already running.
func (s *Server) CreatePool(spec PoolSpec) (godo.KubernetesNodePool, error) {
	if spec.Name == "" {
		return godo.KubernetesNodePool{}, errors.New("pool name is empty")
	}
	if _, ok := lookupSize(spec.Size); !ok {
		return godo.KubernetesNodePool{}, fmt.Errorf("unknown size %q", spec.Size)
	}
	if spec.Count < 0 {
		return godo.KubernetesNodePool{}, fmt.Errorf("count %d is negative", spec.Count)
	}
	if spec.AutoScale {
		if err := checkBounds(spec.Count, spec.MinNodes, spec.MaxNodes); err != nil {
			return godo.KubernetesNodePool{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		if p.name == spec.Name {
			return godo.KubernetesNodePool{}, fmt.Errorf("a pool named %q already exists", spec.Name)
		}
	}
	p := &pool{
		id: string(uuid.NewUUID()), name: spec.Name, size: spec.Size, count: spec.Count,
		autoScale: spec.AutoScale, labels: copyLabels(spec.Labels),
		taints: append([]godo.Taint(nil), spec.Taints...), tags: append([]string(nil), spec.Tags...),
	}
	// DOKS tags every pool, whoever made it.
	for _, t := range defaultPoolTags(s.opts.ClusterID) {
		if !slices.Contains(p.tags, t) {
			p.tags = append(p.tags, t)
		}
	}
	if spec.AutoScale {
		p.minNodes, p.maxNodes = spec.MinNodes, spec.MaxNodes
	}
	s.recordLocked(p, false)
	for i := 0; i < spec.Count; i++ {
		p.nodes = append(p.nodes, s.newNodeLocked(p, StateRunning))
	}
	s.pools = append(s.pools, p)
	s.notifyLocked()
	klog.V(2).Infof("doks simulator: created pool %s (%s) size %s count %d autoscale %v [%d,%d]",
		p.name, p.id, p.size, p.count, p.autoScale, p.minNodes, p.maxNodes)
	return p.toGodo(), nil
}

func checkBounds(count, minNodes, maxNodes int) error {
	if minNodes < 0 || maxNodes < minNodes {
		return fmt.Errorf("min_nodes %d and max_nodes %d are not a valid range", minNodes, maxNodes)
	}
	if count < minNodes || count > maxNodes {
		return fmt.Errorf("node count %d is outside the autoscaling range [%d, %d]", count, minNodes, maxNodes)
	}
	return nil
}

// Pools returns deep copies of all pools, nodes included, in creation order.
func (s *Server) Pools() []godo.KubernetesNodePool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]godo.KubernetesNodePool, 0, len(s.pools))
	for _, p := range s.pools {
		out = append(out, p.toGodo())
	}
	return out
}

// Subscribe returns a channel signalled (without blocking) on every state
// change, and a function that cancels the subscription.
func (s *Server) Subscribe() (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextSub
	s.nextSub++
	ch := make(chan struct{}, 1)
	s.subs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, id)
			s.mu.Unlock()
		})
	}
}

func (s *Server) notifyLocked() {
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// SetNodeState overrides a node's state and message, cancelling its pending
// transitions. Setting "deleting" or "draining" does not remove the node;
// use the API for that.
func (s *Server) SetNodeState(poolID, nodeID, state, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.poolByIDLocked(poolID)
	if p == nil {
		return fmt.Errorf("no pool %q", poolID)
	}
	n := p.nodeByID(nodeID)
	if n == nil {
		return fmt.Errorf("no node %q in pool %q", nodeID, poolID)
	}
	n.epoch++
	n.Status = &godo.KubernetesNodeStatus{State: state, Message: message}
	n.UpdatedAt = time.Now().UTC()
	s.notifyLocked()
	return nil
}

// RequestCount is the number of requests received for an operation, failed
// ones included.
func (s *Server) RequestCount(operation string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[operation]
}

// Faulted is the number of requests for an operation an injected fault met
// (latency-only faults included).
func (s *Server) Faulted(operation string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faulted[operation]
}

// RateLimited is the number of requests for an operation ("": any) refused with 429
// because the token was over DigitalOcean's hourly or per-minute limit (injected faults
// not included). RequestCount counts them too.
func (s *Server) RateLimited(operation string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if operation != "" {
		return s.limited[operation]
	}
	n := 0
	for _, c := range s.limited {
		n += c
	}
	return n
}

// Change is a request received to change pools or nodes (any method but
// GET), with the IDs its path names.
type Change struct {
	// Op is the operation: OpCreateNodePool, OpDeleteNode, ...
	Op string
	// Pool and Node are the path's pool and node IDs ("" when none).
	Pool, Node string
}

// Changes returns the changing requests received, oldest first, refused
// ones included: tests tell from it what was asked, and in which order.
func (s *Server) Changes() []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Change(nil), s.changes...)
}

// TotalRequests is the number of requests received.
func (s *Server) TotalRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// InjectFault adds a fault; faults are tried in the order added and the
// first that matches a request applies.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fc := f
	if fc.Fraction > 0 && fc.Fraction < 1 {
		fc.draws = mrand.New(mrand.NewPCG(fc.Seed, 0))
	}
	s.faults = append(s.faults, &fc)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) poolByIDLocked(id string) *pool {
	for _, p := range s.pools {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (s *Server) poolByNameLocked(name string) *pool {
	for _, p := range s.pools {
		if p.name == name && !p.deleting {
			return p
		}
	}
	return nil
}

func (p *pool) nodeByID(id string) *node {
	for _, n := range p.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// activeNodes are the nodes not on their way out.
func (p *pool) activeNodes() []*node {
	var out []*node
	for _, n := range p.nodes {
		if st := n.Status.State; st != StateDraining && st != StateDeleting {
			out = append(out, n)
		}
	}
	return out
}

func (p *pool) removeNode(id string) {
	for i, n := range p.nodes {
		if n.ID == id {
			p.nodes = append(p.nodes[:i], p.nodes[i+1:]...)
			return
		}
	}
}

func (p *pool) toGodo() godo.KubernetesNodePool {
	out := godo.KubernetesNodePool{
		ID: p.id, Name: p.name, Size: p.size, Count: p.count,
		Tags: append([]string(nil), p.tags...), Labels: copyLabels(p.labels),
		Taints: append([]godo.Taint(nil), p.taints...), AutoScale: p.autoScale,
		MinNodes: p.minNodes, MaxNodes: p.maxNodes,
	}
	for _, n := range p.nodes {
		c := n.KubernetesNode
		st := *n.Status
		c.Status = &st
		out.Nodes = append(out.Nodes, &c)
	}
	return out
}

// newNodeLocked creates a node in the given state; a provisioning node
// becomes running after BootDelay.
func (s *Server) newNodeLocked(p *pool, state string) *node {
	s.nextDroplet++
	now := time.Now().UTC()
	n := &node{KubernetesNode: godo.KubernetesNode{
		ID:        string(uuid.NewUUID()),
		Name:      p.name + "-" + randomSuffix(5),
		Status:    &godo.KubernetesNodeStatus{State: state},
		DropletID: strconv.FormatInt(s.nextDroplet, 10),
		CreatedAt: now,
		UpdatedAt: now,
	}}
	if state == StateProvisioning {
		switch {
		case s.opts.BootDelay == 0:
			n.Status.State = StateRunning
		case s.opts.BootDelay > 0:
			s.afterLocked(s.opts.BootDelay, p.id, n, func(n *node) bool {
				if n.Status.State != StateProvisioning {
					return false
				}
				n.Status = &godo.KubernetesNodeStatus{State: StateRunning}
				return true
			})
		}
	}
	return n
}

// afterLocked runs change on the node after d unless the node's epoch moved
// on; change reports whether it changed anything.
func (s *Server) afterLocked(d time.Duration, poolID string, n *node, change func(*node) bool) {
	epoch := n.epoch
	nodeID := n.ID
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.timers, t)
		if s.closed {
			return
		}
		p := s.poolByIDLocked(poolID)
		if p == nil {
			return
		}
		cur := p.nodeByID(nodeID)
		if cur == nil || cur.epoch != epoch {
			return
		}
		if change(cur) {
			cur.UpdatedAt = time.Now().UTC()
			s.notifyLocked()
		}
	})
	s.timers[t] = struct{}{}
}

// startDeletionLocked moves a node to draining (or straight to deleting
// when drain is skipped) and removes it after DeleteDelay.
func (s *Server) startDeletionLocked(p *pool, n *node, skipDrain bool) {
	n.epoch++
	n.UpdatedAt = time.Now().UTC()
	state := StateDraining
	if skipDrain {
		state = StateDeleting
	}
	n.Status = &godo.KubernetesNodeStatus{State: state}
	d := s.opts.DeleteDelay
	switch {
	case d == 0:
		p.removeNode(n.ID)
	case d > 0:
		if !skipDrain {
			s.afterLocked(d/2, p.id, n, func(n *node) bool {
				n.Status = &godo.KubernetesNodeStatus{State: StateDeleting}
				return true
			})
		}
		nodeID := n.ID
		s.afterLocked(d, p.id, n, func(_ *node) bool {
			p.removeNode(nodeID)
			s.dropIfGoneLocked(p)
			return true
		})
	}
}

// resizeLocked sets the pool's count, adding provisioning nodes or removing
// the newest active nodes.
func (s *Server) resizeLocked(p *pool, count int) {
	active := p.activeNodes()
	for i := len(active); i < count; i++ {
		p.nodes = append(p.nodes, s.newNodeLocked(p, StateProvisioning))
	}
	// p.nodes is in creation order, so the newest active nodes are last.
	for i := len(active) - 1; i >= count && i >= 0; i-- {
		s.startDeletionLocked(p, active[i], true)
	}
	p.count = count
}

func randomSuffix(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

func copyLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
