package digitalocean

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

const listPath = "/v2/kubernetes/clusters/" + testCluster + "/node_pools"

// servePools makes the env's server answer the pool listing with pools
// (godo JSON) instead of the simulator's, whose CreatePool refuses bad
// values a broken API could still send.
func servePools(e *testEnv, pools ...map[string]any) *atomic.Int32 {
	var lists atomic.Int32
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || r.URL.Path != listPath {
			return false
		}
		lists.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"node_pools": pools, "meta": map[string]any{"total": len(pools)}})
		return true
	})
	return &lists
}

func rawPool(id, name string, count, min, max int) map[string]any {
	return map[string]any{"id": id, "name": name, "size": "s-2vcpu-4gb", "count": count, "auto_scale": true,
		"min_nodes": min, "max_nodes": max, "nodes": []map[string]any{}}
}

// A redirect to plain http is refused even on the same host: the token
// would travel in clear.
func TestRedirectToPlainHTTPRefused(t *testing.T) {
	type sent struct {
		scheme string
		auth   bool
	}
	var mu sync.Mutex
	var log []sent
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+r.Host+r.URL.Path, http.StatusFound)
	}))
	defer hs.Close()
	base := hs.Client().Transport.(*http.Transport).Clone()
	recording := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		log = append(log, sent{r.URL.Scheme, r.Header.Get("Authorization") != ""})
		mu.Unlock()
		return base.RoundTrip(r)
	})
	cfg, err := parseConfig([]byte(fmt.Sprintf(`{"cluster_id": %q, "token": %q, "url": %q}`, testCluster, testToken, hs.URL)))
	if err != nil {
		t.Fatal(err)
	}
	o := defaultClientOptions()
	o.transport = recording
	o.maxAttempts = 1
	p, err := newCloudProvider(cfg, config.Defaults(), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Refresh()
	if err == nil || !strings.Contains(err.Error(), "refusing a redirect from https://") {
		t.Fatalf("Refresh error %v, want the redirect to http refused", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range log {
		if s.scheme != "https" {
			t.Errorf("a request went out over %s (Authorization sent: %v)", s.scheme, s.auth)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// streamJSON writes a node pool listing that never ends, up to n bytes.
func streamJSON(w http.ResponseWriter, status int, n int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	chunk := []byte(strings.Repeat(`{"id":"p","name":"n","size":"s-1vcpu-2gb","count":1},`, 1000))
	_, _ = w.Write([]byte(`{"node_pools":[`))
	for written := int64(0); written < n; written += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// An answer over 8 MiB is an error, not retried, and a Refresh against a
// server streaming 128 MiB allocates a bounded amount.
func TestOversizeAnswerRefusedAndBounded(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newEnv(t, doks.Options{})
			var lists atomic.Int32
			e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != listPath {
					return false
				}
				lists.Add(1)
				streamJSON(w, status, 128<<20)
				return true
			})
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := e.p.Refresh()
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "body is over") {
				t.Fatalf("Refresh error %v, want the over-size answer refused", err)
			}
			if n := lists.Load(); n != 1 {
				t.Errorf("%d list requests, want 1 (an over-size answer is not retried)", n)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("Refresh against a 128 MiB answer (%d) allocated %.1f MiB", status, float64(alloc)/(1<<20))
			if alloc >= 64<<20 {
				t.Errorf("Refresh allocated %d MiB, want well under 64 MiB", alloc>>20)
			}
			if len(err.Error()) > 2048 {
				t.Errorf("error text is %d bytes", len(err.Error()))
			}
		})
	}
}

// An API error's text is cut to ~512 bytes; status and request ID stay.
func TestAPIErrorTextTruncated(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: http.StatusUnprocessableEntity,
		Message: strings.Repeat("x", 1<<20) + "\nINJECTED LINE"})
	err := e.p.Refresh()
	if err == nil {
		t.Fatal("Refresh succeeded")
	}
	msg := err.Error()
	if len(msg) > maxErrorText+400 {
		t.Errorf("error text is %d bytes, want about %d at most", len(msg), maxErrorText)
	}
	for _, want := range []string{"422", "(request ", "truncated to 512 bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "INJECTED") {
		t.Errorf("error carries the body's tail or a newline: %q", msg[len(msg)-80:])
	}
}

// Paging stops at 100 pages, and at once when `next` does not advance.
func TestPagingBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		next      func(page int) int
		wantCalls int32
		wantErr   string
	}{
		{"endless", func(p int) int { return p + 1 }, 100, "more than 100 pages"},
		{"repeating", func(int) int { return 1 }, 1, "does not advance"},
		{"going back", func(p int) int { return 3 - p }, 2, "does not advance"}, // 1 → 2 → 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, doks.Options{}, withPageSize(1))
			var calls atomic.Int32
			e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != listPath {
					return false
				}
				calls.Add(1)
				var page int
				fmt.Sscan(r.URL.Query().Get("page"), &page)
				next := fmt.Sprintf("https://api.digitalocean.com%s?page=%d&per_page=1", listPath, tc.next(page))
				_ = json.NewEncoder(w).Encode(map[string]any{
					"node_pools": []any{rawPool(fmt.Sprintf("pool-%d", page), "p", 1, 0, 3)},
					"links":      map[string]any{"pages": map[string]any{"next": next}},
				})
				return true
			})
			err := e.p.Refresh()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Refresh error %v, want %q", err, tc.wantErr)
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Errorf("%d list requests, want %d", n, tc.wantCalls)
			}
		})
	}
}

// A pool listed twice is one node group.
func TestDuplicatePoolIsOneGroup(t *testing.T) {
	e := newEnv(t, doks.Options{})
	servePools(e, rawPool("11111111-0000-4000-8000-000000000001", "a", 1, 0, 3), rawPool("11111111-0000-4000-8000-000000000001", "a", 1, 0, 3))
	e.refresh()
	if n := len(e.p.NodeGroups()); n != 1 {
		t.Fatalf("%d node groups, want 1", n)
	}
}

// A 200 whose body does not decode is a decode error naming the status,
// not a transport failure to retry.
func TestUndecodable200NotRetried(t *testing.T) {
	e := newEnv(t, doks.Options{})
	var calls atomic.Int32
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != listPath {
			return false
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node_pools": [{"id": 12`))
		return true
	})
	err := e.p.Refresh()
	if err == nil || !strings.Contains(err.Error(), "decoding the 200 answer") {
		t.Fatalf("Refresh error %v, want a decode error with the status", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d list requests, want 1 (not retried)", n)
	}
	if got := e.obs.statuses(opListNodePools); len(got) != 1 || got[0] != 200 {
		t.Errorf("observed statuses %v, want [200]", got)
	}
}

// In auto_scale mode, nonsensical bounds or counts are not node groups:
// logged once per change and counted.
func TestAutoScaleBoundsValidated(t *testing.T) {
	logs := captureLogs(t)
	e := newEnv(t, doks.Options{})
	servePools(e,
		rawPool("22222222-0000-4000-8000-000000000000", "good", 1, 0, 3),
		rawPool("22222222-0000-4000-8000-000000000001", "minmax", 1, 4, 2),
		rawPool("22222222-0000-4000-8000-000000000002", "negmin", 1, -1, 2),
		rawPool("22222222-0000-4000-8000-000000000003", "negmax", 0, 0, -2),
		rawPool("22222222-0000-4000-8000-000000000004", "negcount", -3, 0, 2),
	)
	for i := 0; i < 3; i++ {
		e.refresh()
	}
	klog.Flush()
	if ids := groupIDs(e); len(ids) != 1 || ids[0] != "good:0..3" {
		t.Fatalf("node groups %v, want only good:0..3", ids)
	}
	for pool, want := range map[string]string{
		"minmax": "min_nodes 4 is greater than max_nodes 2", "negmin": "min_nodes -1 is negative",
		"negmax": "max_nodes -2 is negative", "negcount": "count -3 is negative",
	} {
		if n := logs.count('E', "node pool "+pool+" ("); n != 1 {
			t.Errorf("pool %s: %d error lines over 3 refreshes, want 1", pool, n)
		}
		if n := logs.count('E', want); n != 1 {
			t.Errorf("no single error line saying %q", want)
		}
	}
	if n := e.obs.refusals(refusedBounds); n != 4 {
		t.Errorf("refusals counted %d, want 4 (once per pool)", n)
	}
}

// No request is sent with a negative count, whatever the caller asks.
func TestNoNegativeCountSent(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 1, 0, 3))
	before := e.sim.TotalRequests()
	if _, err := e.p.m.client.updateNodePoolCount(context.Background(), p.ID, -1); err == nil {
		t.Fatal("a negative count was accepted")
	}
	if e.sim.TotalRequests() != before {
		t.Error("a request went out")
	}
}

// IDs with path characters are refused: no request leaves the cluster's
// path.
func TestPathCharactersInIDsRefused(t *testing.T) {
	e := newEnv(t, doks.Options{})
	log := &requestLog{}
	node := func(id, droplet string) map[string]any {
		return map[string]any{"id": id, "name": "n", "droplet_id": droplet, "status": map[string]any{"state": "running"}}
	}
	withNodes := func(p map[string]any, nodes ...map[string]any) map[string]any {
		p["nodes"] = nodes
		return p
	}
	pools := []map[string]any{
		rawPool("../../../v2/account", "a", 1, 0, 3),
		rawPool("33333333-0000-4000-8000-000000000002", "../../../account?x=", 1, 0, 3),
		withNodes(rawPool("33333333-0000-4000-8000-000000000003", "c", 1, 0, 3), node("n/../../x", "1")),
		withNodes(rawPool("33333333-0000-4000-8000-000000000004", "d", 1, 0, 3), node("33333333-0000-4000-8000-00000000000a", "1#frag")),
		rawPool("33333333-0000-4000-8000-000000000005", "fine", 1, 0, 3),
	}
	inner := servePools(e, pools...)
	_ = inner
	hook := e.hook
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		log.add(r)
		return hook(w, r)
	})
	e.refresh()
	if ids := groupIDs(e); len(ids) != 1 || ids[0] != "fine:0..3" {
		t.Fatalf("node groups %v, want only the pool with clean IDs", ids)
	}
	for _, s := range log.set() {
		if !strings.HasPrefix(strings.SplitN(s, " ", 2)[1], "/v2/kubernetes/clusters/"+testCluster) {
			t.Errorf("a request left the cluster's path: %s", s)
		}
	}
	if n := e.obs.refusals(refusedIDs); n != 4 {
		t.Errorf("refusals counted %d, want 4", n)
	}
	// The client refuses such IDs itself too.
	before := e.sim.TotalRequests()
	if err := e.p.m.client.deleteNode(context.Background(), "33333333-0000-4000-8000-000000000005", "../../x"); err == nil {
		t.Error("deleteNode accepted a node ID with path characters")
	}
	if _, err := e.p.m.client.getNodePoolTemplate(context.Background(), "a?b"); err == nil {
		t.Error("getNodePoolTemplate accepted a name with path characters")
	}
	if e.sim.TotalRequests() != before {
		t.Error("a request went out")
	}
}

// A template with values that make no sense is refused for that pool,
// with an error naming the field; the other pools go on.
func TestBadTemplateRefusedOthersGoOn(t *testing.T) {
	e := newEnv(t, doks.Options{})
	bad := e.pool(autoscaled("bad", 1, 0, 3))
	good := e.pool(autoscaled("good", 1, 0, 3))
	var badFetches atomic.Int32
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/node_pools_template/bad") {
			return false
		}
		badFetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"template": map[string]any{
			"name": "bad", "slug": "s-2vcpu-4gb",
			"capacity":    map[string]any{"cpu_milli_cores": 2000, "memory": "4Gi", "pods": 110},
			"allocatable": map[string]any{"cpu_milli_cores": 9000, "memory": "3Gi", "pods": 110},
		}})
		return true
	})
	e.refresh()
	if _, err := e.group(bad.ID).TemplateNodeInfo(); err == nil || !strings.Contains(err.Error(), "allocatable.cpu") {
		t.Errorf("bad pool's template: %v, want an error naming allocatable.cpu", err)
	}
	if _, err := e.group(good.ID).TemplateNodeInfo(); err != nil {
		t.Errorf("good pool's template: %v", err)
	}
	if n := e.obs.refusals(refusedTemplate); n != 1 {
		t.Errorf("template refusals counted %d, want 1", n)
	}
	e.refresh()
	if n := badFetches.Load(); n != 1 {
		t.Errorf("the refused template was fetched %d times in two refreshes, want 1 (not every loop)", n)
	}
}

func TestTemplateValuesChecked(t *testing.T) {
	pool := &godo.KubernetesNodePool{ID: "p", Name: "pool", Size: "s-2vcpu-4gb"}
	okRes := func() *godo.KubernetesNodePoolResources { return res(2, 2000, "4Gi", 110) }
	cases := []struct {
		name   string
		change func(t *godo.KubernetesNodeTemplate, p *godo.KubernetesNodePool)
		want   string
	}{
		{"allocatable memory above capacity", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Allocatable = res(2, 2000, "5Gi", 110)
		}, "allocatable.memory"},
		{"allocatable pods above capacity", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Allocatable = res(2, 2000, "4Gi", 111)
		}, "allocatable.pods"},
		{"exabytes of memory", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Capacity, t.Allocatable = res(2, 2000, "3Ei", 110), nil
		}, "capacity.memory"},
		{"petacores", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Capacity, t.Allocatable = res(0, 1_000_000_000_000_000, "4Gi", 110), nil
		}, "capacity.cpu_milli_cores"},
		{"absurd pods", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Capacity, t.Allocatable = res(2, 2000, "4Gi", 1_000_000), nil
		}, "capacity.pods"},
		{"negative gpus", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Gpu = &godo.KubernetesNodePoolGPUResources{Count: -1, Vendor: "nvidia"}
		}, "gpu.count"},
		{"bad template label value", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Labels = map[string]string{"tier": "no spaces allowed"}
		}, "template labels[tier]"},
		{"bad template label key", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Labels = map[string]string{"a/b/c": "x"}
		}, "template labels: key"},
		{"bad pool label value", func(_ *godo.KubernetesNodeTemplate, p *godo.KubernetesNodePool) {
			p.Labels = map[string]string{"tier": strings.Repeat("x", 64)}
		}, "node pool labels[tier]"},
		{"bad gpu model", func(t *godo.KubernetesNodeTemplate, _ *godo.KubernetesNodePool) {
			t.Gpu = &godo.KubernetesNodePoolGPUResources{Count: 1, Vendor: "nvidia", Model: "h100 / 80gb"}
		}, "gpu.model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl := &godo.KubernetesNodeTemplate{Capacity: okRes(), Allocatable: okRes()}
			p := *pool
			c.change(tpl, &p)
			_, err := buildTemplateNode(&p, tpl, DefaultGPULabel, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	if _, err := buildTemplateNode(pool, &godo.KubernetesNodeTemplate{Capacity: okRes(), Allocatable: okRes()}, DefaultGPULabel, ""); err != nil {
		t.Fatalf("a sane template refused: %v", err)
	}
}

// Cloud config values: cluster_id a UUID, tokens without control
// characters and of sane length; secrets in the wrong field never echoed.
func TestCloudConfigHardening(t *testing.T) {
	const secret = "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nulFile := write("nul", "dop_v1_abc\x00def\n")
	longFile := write("long", strings.Repeat("a", 5000))
	cfg := func(fields string) string { return `{"cluster_id": "` + testCluster + `", ` + fields + `}` }
	cases := []struct {
		name, json, want string
	}{
		{"placeholder cluster id", `{"cluster_id": "<CLUSTER_ID>", "token": "t"}`, "cluster_id <CLUSTER_ID> is a template placeholder"},
		{"cluster id not a uuid", `{"cluster_id": "my-cluster", "token": "t"}`, "cluster_id (a value of 10 characters) is not a UUID"},
		{"token in cluster id", `{"cluster_id": "` + secret + `", "token": "t"}`, "is not a UUID"},
		{"literal token with NUL", cfg(`"token": "dop_v1_a\u0000b"`), "token: the token (10 characters) contains a control character at byte 8"},
		{"literal token with newline inside", cfg(`"token": "dop_v1_a\nb"`), "contains a control character"},
		{"literal token too long", cfg(`"token": "` + strings.Repeat("a", 5000) + `"`), "the token is 5000 bytes long"},
		{"token file with NUL", cfg(`"token_file": "` + nulFile + `"`), "contains a control character"},
		{"token file too long", cfg(`"token_file": "` + longFile + `"`), "the token is 5000 bytes long"},
		{"token in token_file", cfg(`"token_file": "` + secret + `"`), "failed to read token file (a value of 71 characters)"},
		{"token in url", cfg(`"token": "t", "url": "` + secret + `"`), "url (71 characters) has no host"},
		{"token in url path", cfg(`"token": "t", "url": "https://api.digitalocean.com/` + secret + `"`), "url https://api.digitalocean.com/… has a path of 72 characters"},
		{"token in node_pool_selection", cfg(`"token": "t", "node_pool_selection": "` + secret + `"`), "node_pool_selection (a value of 71 characters) is not valid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error echoes the secret: %v", err)
			}
		})
	}
}

// A token file that becomes unusable logs one warning per change, not one
// per request, and the last good token keeps being used.
func TestTokenFileProblemLoggedOncePerChange(t *testing.T) {
	logs := captureLogs(t)
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := newFileTokenSource(path)
	if err != nil {
		t.Fatal(err)
	}
	tokens := func(n int) {
		for i := 0; i < n; i++ {
			tok, err := src.Token()
			if err != nil || tok.AccessToken != "first" {
				t.Fatalf("token %v %v, want the last good one", tok, err)
			}
		}
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tokens(5)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	tokens(5)
	if err := os.WriteFile(path, []byte("bad\x00token"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens(5)
	klog.Flush()
	for _, want := range []string{"is empty", "no such file or directory", "contains a control character"} {
		if n := logs.count('E', want); n != 1 {
			t.Errorf("%d error lines saying %q over 5 requests, want 1", n, want)
		}
	}
	if err := os.WriteFile(path, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _ := src.Token(); tok.AccessToken != "second" {
		t.Errorf("token %q after a good rewrite, want second", tok.AccessToken)
	}
}

// Cleanup (called by shutdown once the grace for work in flight is over)
// ends a DigitalOcean call that is waiting to retry, and later calls fail
// without a request.
func TestCleanupCancelsCallsInFlight(t *testing.T) {
	e := newEnv(t, doks.Options{}, func(_ *testEnv, o *clientOptions, _ *config.AutoscalingOptions) {
		o.maxWait = time.Hour // the server's Retry-After is followed in full
	})
	p := e.pool(autoscaled("a", 1, 0, 3))
	e.refresh()
	e.sim.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, Status: http.StatusServiceUnavailable, RetryAfter: time.Hour})
	done := make(chan error, 1)
	go func() { done <- e.group(p.ID).IncreaseSize(1) }()
	for e.sim.RequestCount(doks.OpUpdateNodePool) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.p.Cleanup(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("IncreaseSize error %v, want the call cancelled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("IncreaseSize still waiting to retry after Cleanup")
	}
	before := e.sim.TotalRequests()
	if err := e.p.Refresh(); err == nil {
		t.Error("Refresh succeeded after Cleanup")
	}
	if e.sim.TotalRequests() != before {
		t.Error("a request went out after Cleanup")
	}
}
