// Package shadowkube keeps the autoscaler's Kubernetes writes from
// changing the cluster in shadow mode (--shadow; docs/shadow-mode.md):
//
//   - DryRun wraps the transport of the autoscaler's main client (nodes,
//     pods, the CRDs): every write is sent with dryRun=All, so the API
//     server validates and admits it (conflicts, PodDisruptionBudgets on
//     evictions, webhooks) and persists nothing. Writes to Leases (leader
//     election), Events, CapacityBuffers (the autoscaler's own reading of
//     a buffer, which moves no workload) and access reviews go through.
//   - After a dry-run eviction or deletion of a pod, a GET of that pod is
//     answered 404 Not Found for the hold: what the drain would have seen
//     once the pod went. Without it every drain would wait for pods that
//     never leave and fail after --max-graceful-termination-sec.
//   - MarkStatus marks the status ConfigMap (an annotation and its message)
//     and the reporter marks every event with MessagePrefix and Annotation
//     (core/report.ShadowEvents), so that neither is mistaken for a live
//     autoscaler's.
package shadowkube

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// DefaultHold is how long an evicted or deleted pod is shown as gone when
// Options.Hold is zero.
const DefaultHold = 5 * time.Minute

// Options tune DryRun.
type Options struct {
	// Hold is how long a pod evicted or deleted in shadow is answered 404
	// (DefaultHold when 0).
	Hold time.Duration
	// OnWrite, when set, hears every write sent with dryRun=All, as the
	// operation name Operation returns.
	OnWrite func(operation string)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DryRun returns a wrapper for a rest.Config's WrapTransport: see the
// package comment.
func DryRun(opts Options) func(http.RoundTripper) http.RoundTripper {
	if opts.Hold <= 0 {
		opts.Hold = DefaultHold
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// One memory for every client built from the config (they share the
	// wrapper): an eviction by one is seen by the GET of another.
	gone := &goneMemory{pods: map[string]time.Time{}}
	return func(rt http.RoundTripper) http.RoundTripper {
		return &dryRun{next: rt, opts: opts, gone: gone}
	}
}

type dryRun struct {
	next http.RoundTripper
	opts Options
	gone *goneMemory
}

type goneMemory struct {
	mu   sync.Mutex
	pods map[string]time.Time // namespace/name → shown gone until
}

// Target is what a request's path names.
type Target struct {
	Group, Resource, Subresource, Namespace, Name string
}

// ParsePath reads /api/v1/... and /apis/<group>/<version>/... paths.
func ParsePath(path string) (Target, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var t Target
	var rest []string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		t.Group, rest = segs[1], segs[3:]
	default:
		return t, false
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		t.Namespace, rest = rest[1], rest[2:]
	}
	t.Resource = rest[0]
	if len(rest) > 1 {
		t.Name = rest[1]
	}
	if len(rest) > 2 {
		t.Subresource = strings.Join(rest[2:], "/")
	}
	return t, true
}

// passes reports the writes that shadow mode lets through.
func passes(t Target) bool {
	switch {
	case t.Group == "coordination.k8s.io" && t.Resource == "leases":
		return true
	case (t.Group == "" || t.Group == "events.k8s.io") && t.Resource == "events":
		return true
	case t.Group == "autoscaling.x-k8s.io" && t.Resource == "capacitybuffers":
		return true
	case t.Group == "authorization.k8s.io" || t.Group == "authentication.k8s.io":
		return true // reviews persist nothing
	}
	return false
}

// Operation names a write for logs and metrics: verb and resource, e.g.
// "patch_nodes", "create_pods_eviction".
func Operation(method string, t Target) string {
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[method]
	if verb == "" {
		verb = strings.ToLower(method)
	}
	op := verb + "_" + t.Resource
	if t.Subresource != "" {
		op += "_" + strings.ReplaceAll(t.Subresource, "/", "_")
	}
	return op
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func (d *dryRun) RoundTrip(req *http.Request) (*http.Response, error) {
	t, ok := ParsePath(req.URL.Path)
	if !ok {
		return d.next.RoundTrip(req)
	}
	if req.Method == http.MethodGet && t.Group == "" && t.Resource == "pods" && t.Name != "" && t.Subresource == "" && d.gone.shown(t.Namespace+"/"+t.Name, d.opts.Now()) {
		return notFound(req, t), nil
	}
	if !isWrite(req.Method) || passes(t) {
		return d.next.RoundTrip(req)
	}
	// A RoundTripper must not change the caller's request: a clone with the
	// query rewritten (the body is shared, and read once).
	out := req.Clone(req.Context())
	q := out.URL.Query()
	q.Set("dryRun", "All")
	out.URL.RawQuery = q.Encode()
	op := Operation(req.Method, t)
	resp, err := d.next.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	klog.V(2).InfoS("Shadow mode: Kubernetes write sent as a dry run", "operation", op, "namespace", t.Namespace, "name", t.Name, "code", resp.StatusCode)
	if d.opts.OnWrite != nil {
		d.opts.OnWrite(op)
	}
	if resp.StatusCode/100 == 2 && t.Group == "" && t.Resource == "pods" && t.Name != "" &&
		((req.Method == http.MethodPost && t.Subresource == "eviction") || (req.Method == http.MethodDelete && t.Subresource == "")) {
		d.gone.add(t.Namespace+"/"+t.Name, d.opts.Now().Add(d.opts.Hold))
	}
	return resp, nil
}

func (g *goneMemory) add(key string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pods[key] = until
}

func (g *goneMemory) shown(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.pods[key]
	if ok && !now.Before(until) {
		delete(g.pods, key)
		return false
	}
	return ok
}

// notFound is the API server's answer for a pod that does not exist.
func notFound(req *http.Request, t Target) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods %q not found (evicted in shadow mode)","reason":"NotFound","details":{"name":%q,"kind":"pods"},"code":404}`,
		t.Name, t.Name)
	return &http.Response{
		Status: "404 Not Found", StatusCode: http.StatusNotFound, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewBufferString(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}

// HasDryRun reports whether a request URL asks for a dry run.
func HasDryRun(u *url.URL) bool {
	for _, v := range u.Query()["dryRun"] {
		if v == "All" {
			return true
		}
	}
	return false
}
