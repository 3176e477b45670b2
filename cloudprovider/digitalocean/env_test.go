package digitalocean

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

const (
	testCluster = "3f2a9c1e-0000-4000-8000-000000000001"
	testToken   = "test-token-value"
)

type observedCall struct {
	op     string
	status int
	err    error
}

type recordingObserver struct {
	mu        sync.Mutex
	calls     []observedCall
	rateCalls int
	lastLimit int
	lastRem   int
	refused   map[string]int
}

func (o *recordingObserver) ObservePoolRefused(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refused == nil {
		o.refused = map[string]int{}
	}
	o.refused[reason]++
}

func (o *recordingObserver) refusals(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused[reason]
}

func (o *recordingObserver) ObserveCall(op string, status int, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observedCall{op, status, err})
}

func (o *recordingObserver) ObserveRateLimit(limit, remaining int, _ time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rateCalls++
	o.lastLimit, o.lastRem = limit, remaining
}

func (o *recordingObserver) statuses(op string) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int
	for _, c := range o.calls {
		if c.op == op {
			out = append(out, c.status)
		}
	}
	return out
}

// testEnv is a provider talking to a DOKS simulator over loopback HTTP with
// the real godo client.
type testEnv struct {
	t   testing.TB
	sim *doks.Server
	hs  *httptest.Server
	p   *CloudProvider
	obs *recordingObserver

	mu         sync.Mutex
	userAgents []string
	sleeps     []time.Duration
	// hook may answer a request itself (returning true) before the simulator.
	hook func(w http.ResponseWriter, r *http.Request) bool

	clockOffset atomic.Int64 // added to time.Now, to age caches

	// selection is the cloud config's node_pool_selection ("" = unset).
	selection string
	// urlSuffix is appended to the server's address in the cloud config's url.
	urlSuffix string
	// autoprovisioning is the cloud config's autoprovisioning section (JSON).
	autoprovisioning string
	// extraConfig is more of the cloud config's fields (JSON, without
	// braces), e.g. price_overrides.
	extraConfig string
	// restart builds a new provider (an autoscaler restarted, or a new
	// leader) on the same simulator and configuration.
	restart func() *CloudProvider
}

type envOption func(*testEnv, *clientOptions, *config.AutoscalingOptions)

func newEnv(t testing.TB, simOpts doks.Options, options ...envOption) *testEnv {
	t.Helper()
	simOpts.ClusterID = testCluster
	if simOpts.Token == "" {
		simOpts.Token = testToken
	}
	e := &testEnv{t: t, sim: doks.NewServer(simOpts), obs: &recordingObserver{}}
	e.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.userAgents = append(e.userAgents, r.UserAgent())
		hook := e.hook
		e.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		e.sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { e.hs.Close(); e.sim.Close() })

	o := defaultClientOptions()
	o.backoffBase = 10 * time.Millisecond
	o.backoffMax = 40 * time.Millisecond
	o.maxWait = 2 * time.Second
	o.paceMax = 5 * time.Millisecond
	o.attemptTimeout = 5 * time.Second
	o.clock = offsetClock{&e.clockOffset}
	o.sleep = func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		e.sleeps = append(e.sleeps, d)
		e.mu.Unlock()
		return sleepContext(ctx, d)
	}
	// The droplet quota's reads are off unless a test asks (withQuota):
	// tests that count or inspect requests see the ones they make.
	o.quotaTTL = 0
	opts := config.Defaults()
	for _, f := range options {
		f(e, &o, &opts)
	}
	cfgJSON := fmt.Sprintf(`{"cluster_id": %q, "token": %q, "url": %q`, testCluster, simOpts.Token, e.hs.URL+e.urlSuffix)
	if e.selection != "" {
		cfgJSON += fmt.Sprintf(`, "node_pool_selection": %q`, e.selection)
	}
	if e.autoprovisioning != "" {
		cfgJSON += `, "autoprovisioning": ` + e.autoprovisioning
	}
	if e.extraConfig != "" {
		cfgJSON += ", " + e.extraConfig
	}
	cfg, err := parseConfig([]byte(cfgJSON + "}"))
	if err != nil {
		t.Fatal(err)
	}
	o.observer = e.obs
	e.restart = func() *CloudProvider {
		p, err := newCloudProvider(cfg, opts, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	e.p = e.restart()
	return e
}

func withPageSize(n int) envOption {
	return func(_ *testEnv, o *clientOptions, _ *config.AutoscalingOptions) { o.pageSize = n }
}

func withSelection(mode string) envOption {
	return func(e *testEnv, _ *clientOptions, _ *config.AutoscalingOptions) { e.selection = mode }
}

func withURLSuffix(suffix string) envOption {
	return func(e *testEnv, _ *clientOptions, _ *config.AutoscalingOptions) { e.urlSuffix = suffix }
}

// withAutoprovisioning turns node autoprovisioning on with the given
// cloud config section.
func withAutoprovisioning(section string) envOption {
	return func(e *testEnv, _ *clientOptions, opts *config.AutoscalingOptions) {
		e.autoprovisioning = section
		opts.NodeAutoprovisioningEnabled = true
	}
}

// withQuota turns on the droplet quota's reads (every 10 minutes).
func withQuota() envOption {
	return func(_ *testEnv, o *clientOptions, _ *config.AutoscalingOptions) { o.quotaTTL = 10 * time.Minute }
}

// withCloudConfig adds fields (JSON without braces) to the cloud config.
func withCloudConfig(fields string) envOption {
	return func(e *testEnv, _ *clientOptions, _ *config.AutoscalingOptions) { e.extraConfig = fields }
}

func withGPULabel(l string) envOption {
	return func(_ *testEnv, _ *clientOptions, opts *config.AutoscalingOptions) { opts.GPULabel = l }
}

func (e *testEnv) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hook = h
}

func (e *testEnv) recordedSleeps() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.sleeps...)
}

func (e *testEnv) advance(d time.Duration) { e.clockOffset.Add(int64(d)) }

// offsetClock is the real clock moved forward by advance: requests to the
// simulator still run in real time, while caches see the hours go by.
type offsetClock struct{ offset *atomic.Int64 }

func (c offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (e *testEnv) pool(spec doks.PoolSpec) godo.KubernetesNodePool {
	e.t.Helper()
	p, err := e.sim.CreatePool(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *testEnv) refresh() {
	e.t.Helper()
	if err := e.p.Refresh(); err != nil {
		e.t.Fatalf("Refresh: %v", err)
	}
}

// simPool returns the simulator's current view of a pool.
func (e *testEnv) simPool(id string) godo.KubernetesNodePool {
	e.t.Helper()
	for _, p := range e.sim.Pools() {
		if p.ID == id {
			return p
		}
	}
	e.t.Fatalf("pool %s not in simulator", id)
	return godo.KubernetesNodePool{}
}

func (e *testEnv) group(id string) *NodeGroup {
	e.t.Helper()
	for _, g := range e.p.NodeGroups() {
		if g.Id() == id {
			return g.(*NodeGroup)
		}
	}
	e.t.Fatalf("no node group %s", id)
	return nil
}

// kubeNode is the Kubernetes Node a DOKS node registers as.
func kubeNode(n *godo.KubernetesNode) *apiv1.Node {
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{LabelNodeID: n.ID}},
		Spec:       apiv1.NodeSpec{ProviderID: providerIDPrefix + n.DropletID},
	}
}

// godoClient is a second client, for changing pools behind the provider's back.
func (e *testEnv) godoClient() *godo.Client {
	c, err := godo.New(&http.Client{Transport: bearer{testToken}}, godo.SetBaseURL(e.hs.URL+"/"))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func req(cpu, mem string) apiv1.ResourceRequirements {
	return apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
		apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem)}}
}
