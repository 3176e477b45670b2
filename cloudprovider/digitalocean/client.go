package digitalocean

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/version"
)

// Operation names, as reported to the CallObserver.
const (
	opListNodePools       = "ListNodePools"
	opGetNodePoolTemplate = "GetNodePoolTemplate"
	opGetNodePool         = "GetNodePool"
	opUpdateNodePool      = "UpdateNodePool"
	opDeleteNode          = "DeleteNode"
	opCreateNodePool      = "CreateNodePool"
	opDeleteNodePool      = "DeleteNodePool"
	opListSizes           = "ListSizes"
	opGetCluster          = "GetCluster"
)

// clientOptions tune the API client and the caches; tests shorten them.
type clientOptions struct {
	// attemptTimeout bounds one HTTP attempt.
	attemptTimeout time.Duration
	// maxAttempts bounds the attempts of one call, the first included.
	maxAttempts int
	// backoffBase doubles per attempt up to backoffMax when the server gives
	// no hint of how long to wait.
	backoffBase time.Duration
	backoffMax  time.Duration
	// maxWait caps any single wait, including Retry-After and rate-limit
	// reset hints, so one loop is never stalled for long.
	maxWait time.Duration
	// paceMax caps the spacing added between requests when the rate-limit
	// budget runs low.
	paceMax time.Duration
	// observer hears every request attempt (nil: nobody).
	observer CallObserver
	// pageSize is per_page for list calls (the API allows up to 200).
	pageSize int
	// templateTTL: a cached template older than this is fetched again.
	templateTTL time.Duration
	// settingsTTL: the cluster's autoscaler settings are read again after this.
	settingsTTL time.Duration
	// pricesTTL: the size price list is fetched again after this.
	pricesTTL time.Duration
	// quotaTTL: the account's droplet limit and count are read again
	// after this (quota.go); 0 never reads them.
	quotaTTL time.Duration
	// transport is the base HTTP transport (nil: a clone of the default).
	transport http.RoundTripper
	// clock tells the time for caches, pacing and Retry-After; sleep waits,
	// returning early with ctx's error when ctx ends. Tests replace both.
	clock clock.PassiveClock
	sleep func(ctx context.Context, d time.Duration) error
}

func defaultClientOptions() clientOptions {
	return clientOptions{
		attemptTimeout: 30 * time.Second,
		maxAttempts:    5,
		backoffBase:    time.Second,
		backoffMax:     16 * time.Second,
		maxWait:        60 * time.Second,
		paceMax:        10 * time.Second,
		pageSize:       200,
		templateTTL:    time.Hour,
		settingsTTL:    5 * time.Minute,
		pricesTTL:      24 * time.Hour,
		quotaTTL:       10 * time.Minute,
		clock:          clock.RealClock{},
		sleep:          sleepContext,
	}
}

func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// userAgent is sent in front of godo's own User-Agent.
func userAgent() string {
	return "cluster-autoscaler-digitalocean/" + version.Version
}

// apiClient wraps godo with per-attempt timeouts, retries, rate-limit
// pacing and a CallObserver report for every attempt. Retries live here
// rather than in godo's WithRetryAndBackoffs, which would replace the HTTP
// client (and with it the token source) and hide individual attempts.
type apiClient struct {
	godo      *godo.Client
	clusterID string
	o         clientOptions
	observer  CallObserver

	mu   sync.Mutex
	rate rateState
}

// rateState is the latest rate-limit information the API sent.
type rateState struct {
	known     bool
	limit     int
	remaining int
	reset     time.Time
}

func observerOrNoop(o CallObserver) CallObserver {
	if o == nil {
		return noopObserver{}
	}
	return o
}

func newAPIClient(cfg *providerConfig, o clientOptions) (*apiClient, error) {
	base := o.transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	// oauth2.Transport asks the source for a token on every request; no
	// ReuseTokenSource in between, so a rotated token file is seen at once.
	hc := &http.Client{Transport: &oauth2.Transport{Source: cfg.tokenSource, Base: guardTransport{base}},
		CheckRedirect: checkRedirect}
	opts := []godo.ClientOpt{godo.SetUserAgent(userAgent())}
	if cfg.baseURL != "" {
		opts = append(opts, godo.SetBaseURL(cfg.baseURL))
	}
	g, err := godo.New(hc, opts...)
	if err != nil {
		return nil, fmt.Errorf("building the DigitalOcean client: %w", err)
	}
	return &apiClient{godo: g, clusterID: cfg.clusterID, o: o, observer: observerOrNoop(o.observer)}, nil
}

// callKind says whether a call may be sent again when its answer was lost.
type callKind int

const (
	// repeatable: reads, and writes whose repetition leaves the same
	// state (a PUT of an absolute count). Retried on 429, 5xx and lost
	// answers.
	repeatable callKind = iota
	// once: creates and deletes. A 5xx, a timeout, a cut connection or a
	// 2xx whose body is unusable may hide a write that was applied (a
	// load balancer's 504 after the backend acted), and sending it again
	// would make a second pool or turn the deletion into a 404. Only a
	// 429, which DigitalOcean answers before acting, is retried; an
	// unclear answer is returned wrapped in errMaybeApplied, for the
	// caller to resolve by listing.
	once
)

// errMaybeApplied marks the failure of a create or delete whose answer was
// lost, was a server error, or was a success that does not show the result
// (errUnusableAnswer): the write may have been applied.
var errMaybeApplied = errors.New("the request may have been applied: its answer was lost, a server error or a success without the result; the next listing tells")

// maybeApplied reports whether err is a create or delete that may have
// been applied all the same.
func maybeApplied(err error) bool { return errors.Is(err, errMaybeApplied) }

// errUnusableAnswer marks a 2xx answer whose body does not say what was
// done: it is empty or does not decode, or it holds no pool ("{}",
// {"node_pool":null}, a pool without an ID). DigitalOcean accepted the
// write; only its answer is of no use.
var errUnusableAnswer = errors.New("the answer is a success but its body does not show the result")

// call runs fn, retrying what kind allows.
func (c *apiClient) call(ctx context.Context, op string, kind callKind, fn func(ctx context.Context) (*godo.Response, error)) error {
	for attempt := 1; ; attempt++ {
		if err := c.pace(ctx, op); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		rec := &attemptRecord{}
		actx, cancel := context.WithTimeout(withAttemptRecord(ctx, rec), c.o.attemptTimeout)
		start := c.o.clock.Now()
		resp, err := fn(actx)
		cancel()
		elapsed := c.o.clock.Now().Sub(start)

		status, header := responseStatus(resp, err)
		answered := int(rec.status.Load())
		switch {
		case err == nil:
		case rec.overflow.Load() && answered >= 200 && answered <= 299:
			// Not retried: the same server would send the same answer.
			err = fmt.Errorf("the %d answer was refused: its body is over %d bytes (%w)", answered, maxResponseBody, errBodyTooLarge)
			status = answered
		case rec.overflow.Load():
			// An error answer cut at maxErrorBody: its status and request
			// ID are kept, and it is not retried either.
			err = fmt.Errorf("%w (its body is over %d bytes)", asAPIError(err), maxErrorBody)
		case status == 0 && answered != 0:
			// godo drops the response when the body does not decode: the
			// server answered, so this is not a transport failure to retry.
			err = fmt.Errorf("decoding the %d answer: %w", answered, err)
			if answered >= 200 && answered <= 299 {
				err = fmt.Errorf("%w (%w)", err, errUnusableAnswer)
			}
			status = answered
		default:
			err = asAPIError(err)
		}
		c.observer.ObserveCall(op, status, elapsed, err)
		c.noteRate(header)
		if err == nil {
			klog.V(5).InfoS("DigitalOcean call", "op", op, "status", status, "took", elapsed)
			return nil
		}
		wait, why, retry := c.retryPlan(ctx, status, header, err, attempt, kind)
		if rec.overflow.Load() || (status >= 200 && status <= 299) {
			retry = false
		}
		if kind == once && (status < 400 || status >= 500) {
			// Only a 4xx says the write was refused; anything else
			// (no answer, a 5xx, a 2xx that did not decode) may hide
			// one that was applied.
			err = fmt.Errorf("%w (%w)", err, errMaybeApplied)
		}
		if !retry || attempt >= c.o.maxAttempts {
			if attempt > 1 {
				return fmt.Errorf("%s: giving up after %d attempts: %w", op, attempt, err)
			}
			return fmt.Errorf("%s: %w", op, err)
		}
		klog.InfoS("DigitalOcean call failed; retrying", "op", op, "attempt", attempt, "maxAttempts", c.o.maxAttempts,
			"why", why, "retryIn", wait.Round(time.Millisecond))
		if serr := c.o.sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%s: %w (while waiting to retry after: %v)", op, serr, err)
		}
	}
}

func responseStatus(resp *godo.Response, err error) (int, http.Header) {
	if resp != nil && resp.Response != nil {
		return resp.StatusCode, resp.Header
	}
	var er *godo.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode, er.Response.Header
	}
	return 0, nil
}

// retryPlan decides whether a failed attempt is retried and after how long:
// 429 is retried, waiting what Retry-After says, or without it until
// ratelimit-reset when the budget is spent, else an exponential backoff
// with jitter; for repeatable calls 5xx except 501 and transport errors
// (no response) are too; other 4xx are not. Every wait is capped at
// maxWait.
func (c *apiClient) retryPlan(ctx context.Context, status int, h http.Header, err error, attempt int, kind callKind) (time.Duration, string, bool) {
	if ctx.Err() != nil {
		return 0, "", false
	}
	var why string
	switch {
	case status == http.StatusTooManyRequests:
		why = "429 rate limited"
	case kind == once:
		return 0, "", false
	case status >= 500 && status != http.StatusNotImplemented:
		why = fmt.Sprintf("server error %d", status)
	case status == 0:
		why = "no response: " + err.Error()
	default:
		return 0, "", false
	}
	wait, hinted := c.serverHint(status, h)
	if !hinted {
		b := c.o.backoffBase << (attempt - 1)
		if b > c.o.backoffMax || b <= 0 {
			b = c.o.backoffMax
		}
		// Equal jitter: half fixed, half random, so clients sharing a
		// token do not retry in lockstep.
		wait = b/2 + time.Duration(rand.Int64N(int64(b/2)+1))
	}
	if wait > c.o.maxWait {
		wait = c.o.maxWait
	}
	return wait, why, true
}

// serverHint reads Retry-After (seconds or an HTTP date), or for a 429 with
// no budget left, ratelimit-reset.
func (c *apiClient) serverHint(status int, h http.Header) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, true
		}
		if t, err := http.ParseTime(ra); err == nil {
			return max(t.Sub(c.o.clock.Now()), 0), true
		}
	}
	if status == http.StatusTooManyRequests && h.Get("ratelimit-remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("ratelimit-reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(c.o.clock.Now()), 0), true
		}
	}
	return 0, false
}

// noteRate records the rate-limit headers and reports them.
func (c *apiClient) noteRate(h http.Header) {
	if h == nil || h.Get("ratelimit-limit") == "" {
		return
	}
	limit, err1 := strconv.Atoi(h.Get("ratelimit-limit"))
	remaining, err2 := strconv.Atoi(h.Get("ratelimit-remaining"))
	resetUnix, err3 := strconv.ParseInt(h.Get("ratelimit-reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	reset := time.Unix(resetUnix, 0)
	c.mu.Lock()
	c.rate = rateState{known: true, limit: limit, remaining: remaining, reset: reset}
	c.mu.Unlock()
	c.observer.ObserveRateLimit(limit, remaining, reset)
}

// paceDelay is the slow-down rule applied before each request, so that a
// token shared with other tools (Terraform, the cloud controller manager,
// CI) is not driven into 429s:
//   - while more than 5% of the limit (at least 10 requests) remains, no delay;
//   - below that, the remaining requests are spread evenly until
//     ratelimit-reset: delay = (reset - now) / (remaining + 1), at most paceMax;
//   - with nothing left, wait until ratelimit-reset, at most maxWait.
//
// Once the reset time has passed the last reading says nothing and no delay
// applies.
func paceDelay(r rateState, now time.Time, paceMax, maxWait time.Duration) time.Duration {
	if !r.known || !now.Before(r.reset) {
		return 0
	}
	low := max(r.limit/20, 10)
	if r.remaining > low {
		return 0
	}
	untilReset := r.reset.Sub(now)
	if r.remaining <= 0 {
		return min(untilReset, maxWait)
	}
	return min(untilReset/time.Duration(r.remaining+1), paceMax)
}

func (c *apiClient) pace(ctx context.Context, op string) error {
	c.mu.Lock()
	r := c.rate
	c.mu.Unlock()
	d := paceDelay(r, c.o.clock.Now(), c.o.paceMax, c.o.maxWait)
	if d <= 0 {
		return ctx.Err()
	}
	klog.InfoS("DigitalOcean rate limit low: delaying a call", "op", op, "remaining", r.remaining, "limit", r.limit,
		"resetsAt", r.reset.UTC().Format(time.RFC3339), "delay", d.Round(time.Millisecond))
	return c.o.sleep(ctx, d)
}

// listPage is the envelope of a paged list response.
type listPage[T any] struct {
	items []T
	links *godo.Links
	meta  *godo.Meta
}

// listAll fetches every page of a list endpoint. godo's ListNodePools does
// not expose links/meta, so the request is made here: it follows pages
// while links.pages.next is present, or, when the server sends no links,
// while pages come back full.
func listAll[T any](ctx context.Context, c *apiClient, op, path string, decode func(ctx context.Context, path string) (listPage[T], *godo.Response, error)) ([]T, error) {
	var all []T
	for page := 1; page <= maxPages; page++ {
		var got listPage[T]
		q := url.Values{}
		q.Set("page", strconv.Itoa(page))
		q.Set("per_page", strconv.Itoa(c.o.pageSize))
		err := c.call(ctx, op, repeatable, func(ctx context.Context) (*godo.Response, error) {
			var resp *godo.Response
			var err error
			got, resp, err = decode(ctx, path+"?"+q.Encode())
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, got.items...)
		switch {
		case len(got.items) == 0:
			return all, nil
		case got.links != nil:
			if got.links.Pages == nil || got.links.Pages.Next == "" {
				return all, nil
			}
			if next, ok := pageOf(got.links.Pages.Next); ok && next <= page {
				return nil, fmt.Errorf("%s: page %d links to page %d as the next one: the listing does not advance", op, page, next)
			}
		case len(got.items) < c.o.pageSize:
			return all, nil
		}
		if got.meta != nil && got.meta.Total > 0 && len(all) >= got.meta.Total {
			return all, nil
		}
	}
	return nil, fmt.Errorf("%s: more than %d pages (%d items): refusing to list further", op, maxPages, len(all))
}

// maxPages bounds a listing: DOKS clusters have tens of pools and
// DigitalOcean has about a hundred sizes, a page or two at 200 per page; a
// server that keeps sending pages is broken.
const maxPages = 100

// pageOf reads the page number of a links.pages URL.
func pageOf(link string) (int, bool) {
	u, err := url.Parse(link)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(u.Query().Get("page"))
	return n, err == nil
}

func (c *apiClient) listNodePools(ctx context.Context) ([]*godo.KubernetesNodePool, error) {
	// godo's own path for ListNodePools (kubernetes.go), absolute.
	path := fmt.Sprintf("/v2/kubernetes/clusters/%s/node_pools", url.PathEscape(c.clusterID))
	return listAll(ctx, c, opListNodePools, path, func(ctx context.Context, p string) (listPage[*godo.KubernetesNodePool], *godo.Response, error) {
		var root struct {
			NodePools []*godo.KubernetesNodePool `json:"node_pools"`
			Links     *godo.Links                `json:"links"`
			Meta      *godo.Meta                 `json:"meta"`
		}
		req, err := c.godo.NewRequest(ctx, http.MethodGet, p, nil)
		if err != nil {
			return listPage[*godo.KubernetesNodePool]{}, nil, err
		}
		resp, err := c.godo.Do(ctx, req, &root)
		return listPage[*godo.KubernetesNodePool]{items: root.NodePools, links: root.Links, meta: root.Meta}, resp, err
	})
}

func (c *apiClient) listSizes(ctx context.Context) ([]godo.Size, error) {
	// godo's sizes.go says "v2/sizes", relative to the base URL, which is
	// always the server root (see validateURL).
	return listAll(ctx, c, opListSizes, "/v2/sizes", func(ctx context.Context, p string) (listPage[godo.Size], *godo.Response, error) {
		var root struct {
			Sizes []godo.Size `json:"sizes"`
			Links *godo.Links `json:"links"`
			Meta  *godo.Meta  `json:"meta"`
		}
		req, err := c.godo.NewRequest(ctx, http.MethodGet, p, nil)
		if err != nil {
			return listPage[godo.Size]{}, nil, err
		}
		resp, err := c.godo.Do(ctx, req, &root)
		return listPage[godo.Size]{items: root.Sizes, links: root.Links, meta: root.Meta}, resp, err
	})
}

func (c *apiClient) getNodePoolTemplate(ctx context.Context, poolName string) (*godo.KubernetesNodeTemplate, error) {
	if err := checkPathID("node pool name", poolName); err != nil {
		return nil, fmt.Errorf("%s: %w", opGetNodePoolTemplate, err)
	}
	var out *godo.KubernetesNodePoolTemplate
	err := c.call(ctx, opGetNodePoolTemplate, repeatable, func(ctx context.Context) (*godo.Response, error) {
		var resp *godo.Response
		var err error
		out, resp, err = c.godo.Kubernetes.GetNodePoolTemplate(ctx, c.clusterID, poolName)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if out == nil || out.Template == nil {
		return nil, fmt.Errorf("%s: the answer for node pool %q holds no template", opGetNodePoolTemplate, poolName)
	}
	return out.Template, nil
}

// getCluster reads the cluster object: its region and its
// cluster_autoscaler_configuration.
func (c *apiClient) getCluster(ctx context.Context) (*godo.KubernetesCluster, error) {
	var out *godo.KubernetesCluster
	err := c.call(ctx, opGetCluster, repeatable, func(ctx context.Context) (*godo.Response, error) {
		var resp *godo.Response
		var err error
		out, resp, err = c.godo.Kubernetes.Get(ctx, c.clusterID)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("%s: empty answer for cluster %s", opGetCluster, c.clusterID)
	}
	return out, nil
}

// updateNodePoolCount sets a pool's count. A PUT with an absolute count is
// idempotent, so it is retried like a read.
//
// A 2xx whose body holds no pool (empty, undecodable, "{}") says the count
// was accepted without showing the pool: the pool is read back (GET, a
// read) and returned, so the caller sees the count DOKS holds rather than
// a failure of a write that was applied (the core would back the group off
// while its nodes come). The PUT is not sent again: its answer would be the
// same, and the read tells what is needed. A read showing another count is
// the caller's "asked for N but DigitalOcean answered M", as before.
func (c *apiClient) updateNodePoolCount(ctx context.Context, poolID string, count int) (*godo.KubernetesNodePool, error) {
	if err := checkPathID("node pool id", poolID); err != nil {
		return nil, fmt.Errorf("%s: %w", opUpdateNodePool, err)
	}
	if count < 0 {
		return nil, fmt.Errorf("%s: refusing to set node pool %s to a negative count, %d", opUpdateNodePool, poolID, count)
	}
	out, status, err := c.poolCall(ctx, opUpdateNodePool, repeatable, func(ctx context.Context) (*godo.KubernetesNodePool, *godo.Response, error) {
		n := count
		return c.godo.Kubernetes.UpdateNodePool(ctx, c.clusterID, poolID, &godo.KubernetesNodePoolUpdateRequest{Count: &n})
	})
	switch {
	case errors.Is(err, errUnusableAnswer):
	case err != nil:
		return nil, err
	case out == nil || out.ID == "":
		err = fmt.Errorf("%s: the %d answer for node pool %s holds no pool (%w)", opUpdateNodePool, status, poolID, errUnusableAnswer)
	default:
		return out, nil
	}
	klog.ErrorS(err, "DigitalOcean accepted a node pool count but its answer does not show the pool: reading the pool back", "nodePool", poolID, "count", count)
	got, gerr := c.getNodePool(ctx, poolID)
	if gerr != nil {
		return nil, fmt.Errorf("%w; reading the pool back: %w", err, gerr)
	}
	return got, nil
}

// getNodePool reads one pool.
func (c *apiClient) getNodePool(ctx context.Context, poolID string) (*godo.KubernetesNodePool, error) {
	if err := checkPathID("node pool id", poolID); err != nil {
		return nil, fmt.Errorf("%s: %w", opGetNodePool, err)
	}
	var out *godo.KubernetesNodePool
	err := c.call(ctx, opGetNodePool, repeatable, func(ctx context.Context) (*godo.Response, error) {
		var resp *godo.Response
		var err error
		out, resp, err = c.godo.Kubernetes.GetNodePool(ctx, c.clusterID, poolID)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if out == nil || out.ID == "" {
		return nil, fmt.Errorf("%s: the answer for node pool %s holds no pool (%w)", opGetNodePool, poolID, errUnusableAnswer)
	}
	return out, nil
}

// deleteNode deletes one node with skip_drain (the autoscaler has drained
// it already; DOKS would drain it a second time) and without replacement.
func (c *apiClient) deleteNode(ctx context.Context, poolID, nodeID string) error {
	for _, id := range [][2]string{{"node pool id", poolID}, {"node id", nodeID}} {
		if err := checkPathID(id[0], id[1]); err != nil {
			return fmt.Errorf("%s: %w", opDeleteNode, err)
		}
	}
	return c.call(ctx, opDeleteNode, once, func(ctx context.Context) (*godo.Response, error) {
		return c.godo.Kubernetes.DeleteNode(ctx, c.clusterID, poolID, nodeID, &godo.KubernetesNodeDeleteRequest{SkipDrain: true})
	})
}

// poolCall runs a write whose answer holds a pool, through call, and
// returns the pool and the answer's status code (0 without an answer).
func (c *apiClient) poolCall(ctx context.Context, op string, kind callKind,
	write func(context.Context) (*godo.KubernetesNodePool, *godo.Response, error)) (*godo.KubernetesNodePool, int, error) {
	var out *godo.KubernetesNodePool
	var status int
	err := c.call(ctx, op, kind, func(ctx context.Context) (*godo.Response, error) {
		var resp *godo.Response
		var err error
		out, resp, err = write(ctx)
		if resp != nil && resp.Response != nil {
			status = resp.StatusCode
		}
		return resp, err
	})
	return out, status, err
}

// createNodePool creates a pool. A POST is not idempotent: it is never
// repeated after an unclear answer (a second pool would be made); the error
// then satisfies maybeApplied and the caller looks for the pool by name.
// A 2xx (DigitalOcean answers 201) whose body holds no pool is such an
// answer: the status says the pool was made, the body cannot say which,
// so it is reconciled by name like a 504 after applying, never taken for
// a refusal (which would leave the pool made and unknown).
func (c *apiClient) createNodePool(ctx context.Context, req *godo.KubernetesNodePoolCreateRequest) (*godo.KubernetesNodePool, error) {
	if err := checkPathID("node pool name", req.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", opCreateNodePool, err)
	}
	out, status, err := c.poolCall(ctx, opCreateNodePool, once, func(ctx context.Context) (*godo.KubernetesNodePool, *godo.Response, error) {
		return c.godo.Kubernetes.CreateNodePool(ctx, c.clusterID, req)
	})
	switch {
	case errors.Is(err, errUnusableAnswer):
		// An empty or undecodable 2xx: call has marked it maybeApplied.
	case err != nil:
		return nil, err
	case out == nil || out.ID == "":
		err = fmt.Errorf("%s: the %d answer for node pool %q holds no pool (%w) (%w)", opCreateNodePool, status, req.Name, errUnusableAnswer, errMaybeApplied)
	default:
		return out, nil
	}
	klog.ErrorS(err, "DigitalOcean accepted a node pool creation but its answer does not show the pool: it is looked for by name in the listings, as after a lost answer",
		"name", req.Name)
	return nil, err
}

// deleteNodePool deletes a pool; DOKS then drains and deletes its nodes.
// Not repeated after an unclear answer (maybeApplied): a second DELETE of
// an applied one answers 404.
func (c *apiClient) deleteNodePool(ctx context.Context, poolID string) error {
	if err := checkPathID("node pool id", poolID); err != nil {
		return fmt.Errorf("%s: %w", opDeleteNodePool, err)
	}
	return c.call(ctx, opDeleteNodePool, once, func(ctx context.Context) (*godo.Response, error) {
		return c.godo.Kubernetes.DeleteNodePool(ctx, c.clusterID, poolID)
	})
}
