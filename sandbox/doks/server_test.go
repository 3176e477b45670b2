package doks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
	apiv1 "k8s.io/api/core/v1"
)

const (
	testCluster = "c-123"
	testToken   = "tok-abc"
)

func newTestServer(t *testing.T, opts Options) (*Server, *godo.Client, *httptest.Server) {
	t.Helper()
	if opts.ClusterID == "" {
		opts.ClusterID = testCluster
	}
	if opts.Token == "" {
		opts.Token = testToken
	}
	s := NewServer(opts)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: opts.Token}))
	c, err := godo.New(hc, godo.SetBaseURL(hs.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	return s, c, hs
}

func mustPool(t *testing.T, s *Server, spec PoolSpec) godo.KubernetesNodePool {
	t.Helper()
	p, err := s.CreatePool(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func statusOf(err error) int {
	var er *godo.ErrorResponse
	if errors.As(err, &er) {
		return er.Response.StatusCode
	}
	return 0
}

// waitFor polls cond after each state change notification, up to 5 s.
func waitFor(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	ch, cancel := s.Subscribe()
	defer cancel()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestListNodePoolsPaging(t *testing.T) {
	s, _, hs := newTestServer(t, Options{})
	for i := 0; i < 45; i++ {
		mustPool(t, s, PoolSpec{Name: fmt.Sprintf("pool-%02d", i), Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 3})
	}
	type page struct {
		NodePools []apiPool `json:"node_pools"`
		Links     struct {
			Pages *godo.Pages `json:"pages"`
		} `json:"links"`
		Meta apiMeta `json:"meta"`
	}
	get := func(query string) page {
		req, _ := http.NewRequest("GET", hs.URL+"/v2/kubernetes/clusters/"+testCluster+"/node_pools"+query, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p page
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		query    string
		n        int
		hasNext  bool
		nextPage int
	}{
		{"", 20, true, 2},
		{"?page=2", 20, true, 3},
		{"?page=3", 5, false, 0},
		{"?page=1&per_page=200", 45, false, 0},
		{"?per_page=1000", 45, false, 0},
		{"?page=9", 0, false, 0},
	}
	for _, c := range cases {
		p := get(c.query)
		if len(p.NodePools) != c.n || p.Meta.Total != 45 {
			t.Errorf("%q: got %d pools, total %d; want %d, 45", c.query, len(p.NodePools), p.Meta.Total, c.n)
		}
		hasNext := p.Links.Pages != nil && p.Links.Pages.Next != ""
		if hasNext != c.hasNext {
			t.Errorf("%q: next link present %v, want %v", c.query, hasNext, c.hasNext)
		}
		if hasNext {
			want := "page=" + strconv.Itoa(c.nextPage)
			if !strings.Contains(p.Links.Pages.Next, want) {
				t.Errorf("%q: next link %q lacks %s", c.query, p.Links.Pages.Next, want)
			}
		}
	}
}

func TestAuthRateHeadersAndNotFound(t *testing.T) {
	s, c, hs := newTestServer(t, Options{})
	p := mustPool(t, s, PoolSpec{Name: "a", Size: "s-1vcpu-2gb", Count: 1})

	req, _ := http.NewRequest("GET", hs.URL+"/v2/kubernetes/clusters/"+testCluster+"/node_pools", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("wrong token: status %d", resp.StatusCode)
	}
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.ID != "Unauthorized" {
		t.Errorf("401 body %s is not a JSON error", body)
	}
	for _, h := range []string{"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("401 lacks %s header", h)
		}
	}

	ctx := context.Background()
	_, r, err := c.Kubernetes.GetNodePool(ctx, testCluster, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rate.Limit != DefaultRateLimit || r.Rate.Remaining != DefaultRateLimit-2 {
		t.Errorf("rate %+v, want limit %d remaining %d", r.Rate, DefaultRateLimit, DefaultRateLimit-2)
	}
	if _, _, err := c.Kubernetes.GetNodePool(ctx, "other-cluster", p.ID); statusOf(err) != 404 {
		t.Errorf("unknown cluster: %v", err)
	}
	if _, _, err := c.Kubernetes.GetNodePool(ctx, testCluster, "nope"); statusOf(err) != 404 {
		t.Errorf("unknown pool: %v", err)
	}
	if _, _, err := c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, "nope"); statusOf(err) != 404 {
		t.Errorf("unknown template: %v", err)
	}
	if got := s.RequestCount(OpGetNodePool); got != 3 {
		t.Errorf("GetNodePool count %d, want 3", got)
	}
	if got := s.TotalRequests(); got != 5 {
		t.Errorf("total %d, want 5", got)
	}
}

func TestUpdatePoolGrowsAndShrinks(t *testing.T) {
	s, c, _ := newTestServer(t, Options{BootDelay: 50 * time.Millisecond, DeleteDelay: 50 * time.Millisecond})
	p := mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5})
	ctx := context.Background()
	three := 3
	got, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, p.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &three})
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 3 || len(got.Nodes) != 3 {
		t.Fatalf("count %d nodes %d, want 3 and 3", got.Count, len(got.Nodes))
	}
	seen := map[string]bool{}
	for _, n := range got.Nodes[1:] {
		if n.Status.State != StateProvisioning {
			t.Errorf("new node %s is %s, want provisioning", n.Name, n.Status.State)
		}
		if _, err := strconv.ParseInt(n.DropletID, 10, 64); err != nil || len(n.ID) != 36 || seen[n.ID] {
			t.Errorf("new node has id %q droplet %q", n.ID, n.DropletID)
		}
		seen[n.ID] = true
	}
	waitFor(t, s, "new nodes running", func() bool {
		for _, n := range s.Pools()[0].Nodes {
			if n.Status.State != StateRunning {
				return false
			}
		}
		return true
	})

	newest := got.Nodes[2].ID
	two := 2
	got, _, err = c.Kubernetes.UpdateNodePool(ctx, testCluster, p.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &two})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got.Nodes {
		want := StateRunning
		if n.ID == newest {
			want = StateDeleting
		}
		if n.Status.State != want {
			t.Errorf("after shrink node %s is %s, want %s", n.Name, n.Status.State, want)
		}
	}
	waitFor(t, s, "removed node gone", func() bool { return len(s.Pools()[0].Nodes) == 2 })

	// Out of range for an autoscaled pool: 422 and nothing changes.
	nine := 9
	if _, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, p.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &nine}); statusOf(err) != 422 {
		t.Fatalf("count above max: %v", err)
	}
	if s.Pools()[0].Count != 2 {
		t.Errorf("rejected update changed count to %d", s.Pools()[0].Count)
	}

	// Spec fields are honoured.
	off := false
	taints := []godo.Taint{{Key: "k", Value: "v", Effect: "NoSchedule"}}
	got, _, err = c.Kubernetes.UpdateNodePool(ctx, testCluster, p.ID, &godo.KubernetesNodePoolUpdateRequest{
		Name: "renamed", AutoScale: &off, Labels: map[string]string{"x": "y"}, Taints: &taints, Count: &nine})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || got.AutoScale || got.MinNodes != 0 || got.Labels["x"] != "y" || len(got.Taints) != 1 || got.Count != 9 {
		t.Errorf("update not honoured: %+v", got)
	}
}

func TestDeleteNode(t *testing.T) {
	s, c, _ := newTestServer(t, Options{DeleteDelay: -1})
	p := mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 4, AutoScale: true, MinNodes: 2, MaxNodes: 5})
	ctx := context.Background()
	cases := []struct {
		name       string
		node       int
		req        *godo.KubernetesNodeDeleteRequest
		wantState  string
		wantCount  int
		wantStatus int
	}{
		{"skip drain", 0, &godo.KubernetesNodeDeleteRequest{SkipDrain: true}, StateDeleting, 3, 0},
		{"drain", 1, nil, StateDraining, 2, 0},
		{"below min", 2, nil, StateRunning, 2, 422},
		{"replace", 3, &godo.KubernetesNodeDeleteRequest{Replace: true}, StateDraining, 2, 0},
	}
	for _, tc := range cases {
		nodeID := p.Nodes[tc.node].ID
		_, err := c.Kubernetes.DeleteNode(ctx, testCluster, p.ID, nodeID, tc.req)
		if statusOf(err) != tc.wantStatus && !(tc.wantStatus == 0 && err == nil) {
			t.Fatalf("%s: err %v, want status %d", tc.name, err, tc.wantStatus)
		}
		cur := s.Pools()[0]
		if cur.Count != tc.wantCount {
			t.Errorf("%s: count %d, want %d", tc.name, cur.Count, tc.wantCount)
		}
		for _, n := range cur.Nodes {
			if n.ID == nodeID && n.Status.State != tc.wantState {
				t.Errorf("%s: node state %s, want %s", tc.name, n.Status.State, tc.wantState)
			}
		}
	}
	if n := len(s.Pools()[0].Nodes); n != 5 {
		t.Errorf("replace should add a node: %d nodes, want 5", n)
	}
	if _, err := c.Kubernetes.DeleteNode(ctx, testCluster, p.ID, "missing", nil); statusOf(err) != 404 {
		t.Errorf("missing node: %v", err)
	}
}

func TestTemplateAndSizes(t *testing.T) {
	s, c, _ := newTestServer(t, Options{})
	mustPool(t, s, PoolSpec{Name: "cpu pool", Size: "s-1vcpu-2gb", Count: 1,
		Labels: map[string]string{"team": "a"}, Taints: []godo.Taint{{Key: "dedicated", Value: "a", Effect: "NoSchedule"}, {Key: "bare", Effect: "NoExecute"}}})
	mustPool(t, s, PoolSpec{Name: "gpu", Size: "gpu-mi300x1-192gb", Count: 0})
	ctx := context.Background()

	tmpl, _, err := c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, "cpu pool")
	if err != nil {
		t.Fatal(err)
	}
	tt := tmpl.Template
	if tt.Slug != "s-1vcpu-2gb" || tt.Capacity.CpuMilliCores != 1000 || tt.Allocatable.CpuMilliCores != 390 ||
		tt.Capacity.Memory != "2048Mi" || tt.Allocatable.Pods != 110 || tt.Labels["team"] != "a" || tt.Gpu != nil {
		t.Errorf("template %+v cap %+v alloc %+v", tt, tt.Capacity, tt.Allocatable)
	}
	if len(tt.Taints) != 2 || tt.Taints[0] != "dedicated=a:NoSchedule" || tt.Taints[1] != "bare:NoExecute" {
		t.Errorf("taints %v", tt.Taints)
	}
	g, _, err := c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if g.Template.Gpu == nil || g.Template.Gpu.Vendor != "amd" || g.Template.Gpu.Count != 1 {
		t.Errorf("gpu template %+v", g.Template.Gpu)
	}

	var all []godo.Size
	opt := &godo.ListOptions{Page: 1, PerPage: 5}
	for {
		sizes, resp, err := c.Sizes.List(ctx, opt)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sizes...)
		if resp.Links == nil || resp.Links.IsLastPage() {
			break
		}
		opt.Page++
	}
	if len(all) != len(catalogue) {
		t.Fatalf("listed %d sizes, want %d", len(all), len(catalogue))
	}
	if s.RequestCount(OpListSizes) != (len(catalogue)+4)/5 {
		t.Errorf("sizes requests %d", s.RequestCount(OpListSizes))
	}
	for _, sz := range all {
		if sz.PriceHourly <= 0 || sz.Vcpus <= 0 {
			t.Errorf("size %s has no price or vcpus", sz.Slug)
		}
	}

	capa, alloc, ok := SizeResources("gpu-h100x1-80gb")
	if !ok {
		t.Fatal("gpu-h100x1-80gb unknown")
	}
	gpu := capa[apiv1.ResourceName("nvidia.com/gpu")]
	if gpu.Value() != 1 || alloc.Cpu().MilliValue() >= capa.Cpu().MilliValue() {
		t.Errorf("capacity %v allocatable %v", capa, alloc)
	}
	if _, _, ok := SizeResources("no-such-size"); ok {
		t.Error("unknown slug reported ok")
	}
}

func TestFaultsAndRateLimit(t *testing.T) {
	s, c, _ := newTestServer(t, Options{})
	ctx := context.Background()
	s.InjectFault(Fault{Operation: OpListNodePools, Status: 429, RetryAfter: 2 * time.Second, Times: 1})
	_, resp, err := c.Kubernetes.ListNodePools(ctx, testCluster, nil)
	if statusOf(err) != 429 || resp.Header.Get("retry-after") != "2" {
		t.Fatalf("want 429 with retry-after 2: %v", err)
	}
	if _, _, err := c.Kubernetes.ListNodePools(ctx, testCluster, nil); err != nil {
		t.Fatalf("fault should have expired: %v", err)
	}
	s.InjectFault(Fault{Status: 500, Message: "boom"})
	for i := 0; i < 3; i++ {
		if _, _, err := c.Sizes.List(ctx, nil); statusOf(err) != 500 {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	s.ClearFaults()
	s.InjectFault(Fault{Latency: 30 * time.Millisecond, Times: 1})
	start := time.Now()
	if _, _, err := c.Sizes.List(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Error("latency fault not applied")
	}

	s.SetRateLimit(s.TotalRequests() + 2)
	var last *godo.Response
	for i := 0; i < 2; i++ {
		_, last, err = c.Sizes.List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if last.Rate.Remaining != 0 {
		t.Errorf("remaining %d, want 0", last.Rate.Remaining)
	}
	// Over the hourly budget: 429, and the time to come back is ratelimit-reset.
	_, resp, err = c.Sizes.List(ctx, nil)
	if statusOf(err) != 429 || resp.Header.Get("retry-after") != "" || !resp.Rate.Reset.After(time.Now()) {
		t.Errorf("over the hourly limit: %v, retry-after %q, reset %v", err, resp.Header.Get("retry-after"), resp.Rate.Reset)
	}
	// The injected 429 was a fault, not the limit.
	if got := s.RateLimited(""); got != 1 {
		t.Errorf("RateLimited = %d, want 1 (the hourly refusal only)", got)
	}
}

// Over the per-minute limit with hourly budget left: 429 with retry-after
// counting down to when the oldest request of the minute ages out.
func TestPerMinuteLimit(t *testing.T) {
	s, c, _ := newTestServer(t, Options{BootDelay: -1})
	ctx := context.Background()
	s.SetMinuteLimit(2)
	for i := 0; i < 2; i++ {
		if _, _, err := c.Sizes.List(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, resp, err := c.Sizes.List(ctx, nil)
	ra, _ := strconv.Atoi(resp.Header.Get("retry-after"))
	if statusOf(err) != 429 || ra < 1 || ra > 60 {
		t.Errorf("over the per-minute limit: %v, retry-after %q", err, resp.Header.Get("retry-after"))
	}
	if resp.Rate.Remaining == 0 {
		t.Error("a per-minute refusal reported the hourly budget as spent")
	}
	if got, of := s.RateLimited(""), s.RateLimited(OpListSizes); got != 1 || of != 1 {
		t.Errorf("RateLimited: %d in all, %d of ListSizes after one refusal of ListSizes, want 1 and 1", got, of)
	}
}

func TestSubscribeAndSetNodeState(t *testing.T) {
	s, _, _ := newTestServer(t, Options{BootDelay: -1})
	ch, cancel := s.Subscribe()
	defer cancel()
	p := mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 1})
	select {
	case <-ch:
	default:
		t.Fatal("no notification for CreatePool")
	}
	if err := s.SetNodeState(p.ID, p.Nodes[0].ID, "error", "droplet failed"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no notification for SetNodeState")
	}
	n := s.Pools()[0].Nodes[0]
	if n.Status.State != "error" || n.Status.Message != "droplet failed" {
		t.Errorf("state %+v", n.Status)
	}
	if err := s.SetNodeState(p.ID, "missing", "running", ""); err == nil {
		t.Error("unknown node accepted")
	}
	if _, err := s.CreatePool(PoolSpec{Name: "b", Size: "no-such"}); err == nil {
		t.Error("unknown size accepted")
	}
	if _, err := s.CreatePool(PoolSpec{Name: "a", Size: "s-2vcpu-4gb"}); err == nil {
		t.Error("duplicate name accepted")
	}
	if _, err := s.CreatePool(PoolSpec{Name: "c", Size: "s-2vcpu-4gb", Count: 9, AutoScale: true, MinNodes: 1, MaxNodes: 3}); err == nil {
		t.Error("count above max accepted")
	}
}

func TestStartServesOnLoopback(t *testing.T) {
	s := NewServer(Options{ClusterID: testCluster, Token: testToken})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: testToken}))
	c, _ := godo.New(hc, godo.SetBaseURL(s.URL()))
	if _, _, err := c.Kubernetes.ListNodePools(context.Background(), testCluster, nil); err != nil {
		t.Fatal(err)
	}
}

// A rotation: both tokens are valid while it runs, only the new one after.
func TestSetTokensRefusesTheOldTokenAfterRotation(t *testing.T) {
	s, old, hs := newTestServer(t, Options{})
	client := func(token string) *godo.Client {
		c, err := godo.New(oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})), godo.SetBaseURL(hs.URL+"/"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	list := func(c *godo.Client) int {
		_, _, err := c.Kubernetes.ListNodePools(context.Background(), testCluster, nil)
		return statusOf(err)
	}
	s.SetTokens(testToken, "tok-new")
	if list(old) != 0 || list(client("tok-new")) != 0 {
		t.Fatal("a token was refused during the rotation")
	}
	s.SetTokens("tok-new")
	if got := list(old); got != 401 {
		t.Errorf("old token after the rotation: status %d, want 401", got)
	}
	if got := list(client("tok-new")); got != 0 {
		t.Errorf("new token after the rotation: status %d", got)
	}
}

func TestDropletLimitRefusesGrowthAcrossPools(t *testing.T) {
	s, c, _ := newTestServer(t, Options{DropletLimit: 4})
	a := mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10})
	b := mustPool(t, s, PoolSpec{Name: "b", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 10})
	ctx := context.Background()
	count := func(n int) *godo.KubernetesNodePoolUpdateRequest {
		return &godo.KubernetesNodePoolUpdateRequest{Count: &n}
	}

	// 1 + 3 = 4 droplets: at the limit, accepted.
	if _, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, a.ID, count(3)); err != nil {
		t.Fatal(err)
	}
	// The limit is the account's: pool b cannot grow either.
	_, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, b.ID, count(2))
	var er *godo.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || er.Message != DropletLimitMessage {
		t.Fatalf("growth over the droplet limit: got %v, want 422 %q", err, DropletLimitMessage)
	}
	if got := s.Pools()[1].Count; got != 1 {
		t.Errorf("refused update changed pool b's count to %d", got)
	}
	// Shrinking is never refused; a raised limit lets the pool grow.
	if _, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, a.ID, count(2)); err != nil {
		t.Fatalf("shrink at the limit: %v", err)
	}
	s.SetDropletLimit(10)
	if _, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, b.ID, count(5)); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
}

func TestTokenWithoutTagReadListsPoolsWithoutTags(t *testing.T) {
	s, full, hs := newTestServer(t, Options{})
	mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 1, Tags: []string{"k8s", "k8s-worker"}})
	const scoped = "token-without-tag-read"
	s.SetTokens(testToken, scoped)
	s.SetTokenWithoutTagRead(scoped)
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: scoped}))
	noTags, err := godo.New(hc, godo.SetBaseURL(hs.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		client *godo.Client
		want   int
	}{{"full-access token", full, 3}, {"token without tag:read", noTags, 0}} { // k8s:<cluster> added as DOKS does
		pools, _, err := c.client.Kubernetes.ListNodePools(ctx, testCluster, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(pools[0].Tags); got != c.want {
			t.Errorf("%s: listed pool has %d tags, want %d", c.name, got, c.want)
		}
		p, _, err := c.client.Kubernetes.GetNodePool(ctx, testCluster, pools[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(p.Tags); got != c.want {
			t.Errorf("%s: pool read has %d tags, want %d", c.name, got, c.want)
		}
	}
}

// A fault with a Fraction meets about that share of the matching requests, the
// same ones again for the same seed, lets the others through to the next fault,
// and leaves other operations alone.
func TestFaultFractionIsSeededAndPartial(t *testing.T) {
	ctx := context.Background()
	const n = 400
	pattern := func(seed uint64) []int {
		s, c, _ := newTestServer(t, Options{})
		s.SetMinuteLimit(2 * n)
		s.InjectFault(Fault{Operation: OpListSizes, Status: 504, Fraction: 0.2, Seed: seed})
		s.InjectFault(Fault{Operation: OpListSizes, Status: 502, Times: 1})
		var out []int
		for i := 0; i < n; i++ {
			_, _, err := c.Sizes.List(ctx, nil)
			out = append(out, statusOf(err))
		}
		if _, _, err := c.Kubernetes.ListNodePools(ctx, testCluster, nil); err != nil {
			t.Errorf("another operation met the fault: %v", err)
		}
		failed := 0
		for _, st := range out {
			if st != 0 {
				failed++
			}
		}
		if s.Faulted(OpListSizes) != failed || s.Faulted(OpListNodePools) != 0 {
			t.Errorf("Faulted says %d list sizes and %d list pools, want %d and 0", s.Faulted(OpListSizes), s.Faulted(OpListNodePools), failed)
		}
		return out
	}
	a := pattern(7)
	counts := map[int]int{}
	for _, st := range a {
		counts[st]++
	}
	if counts[504] < n/10 || counts[504] > n*3/10 {
		t.Errorf("%d of %d requests answered 504, want about a fifth", counts[504], n)
	}
	if counts[502] != 1 {
		t.Errorf("the next fault met %d requests, want the one it allows", counts[502])
	}
	if !slices.Equal(a, pattern(7)) {
		t.Error("the same seed faulted other requests")
	}
	if slices.Equal(a, pattern(8)) {
		t.Error("another seed faulted the same requests")
	}
}
