package digitalocean

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// requestLog records method and path of every request a server gets.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.Method+" "+r.URL.Path)
}

func (l *requestLog) set() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]bool{}
	for _, s := range l.seen {
		m[s] = true
	}
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// godoPaths asks godo itself, with its default base URL form (the server
// root), which method and path each call the provider makes goes to.
func godoPaths(t *testing.T, poolID, poolName, nodeID string) []string {
	t.Helper()
	log := &requestLog{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer hs.Close()
	c, err := godo.New(hs.Client(), godo.SetBaseURL(hs.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 2
	_, _, _ = c.Kubernetes.ListNodePools(ctx, testCluster, &godo.ListOptions{Page: 1, PerPage: 1})
	_, _, _ = c.Kubernetes.Get(ctx, testCluster)
	_, _, _ = c.Kubernetes.GetNodePoolTemplate(ctx, testCluster, poolName)
	_, _, _ = c.Kubernetes.UpdateNodePool(ctx, testCluster, poolID, &godo.KubernetesNodePoolUpdateRequest{Count: &n})
	_, _ = c.Kubernetes.DeleteNode(ctx, testCluster, poolID, nodeID, &godo.KubernetesNodeDeleteRequest{SkipDrain: true})
	_, _, _ = c.Sizes.List(ctx, nil)
	_, _, _ = c.Account.Get(ctx)
	_, _, _ = c.Droplets.List(ctx, &godo.ListOptions{Page: 1, PerPage: 1})
	return log.set()
}

// Every url form users copy from DigitalOcean's and upstream's examples
// sends every call to the path godo uses for it; the simulator answers 404
// for any other path, so none may reach it.
func TestEveryURLFormUsesGodoPaths(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v2", "/v2/"} {
		t.Run("url=host"+suffix, func(t *testing.T) {
			log := &requestLog{}
			e := newEnv(t, doks.Options{DropletLimit: 25}, withPageSize(1), withURLSuffix(suffix), withQuota())
			e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				log.add(r)
				return false
			})
			a := e.pool(autoscaled("a", 2, 0, 5))
			e.pool(autoscaled("b", 1, 0, 5))
			e.refresh()
			if len(e.p.NodeGroups()) != 2 {
				t.Fatalf("%d node groups, want 2 (both pages listed)", len(e.p.NodeGroups()))
			}
			g := e.group(a.ID)
			if err := g.IncreaseSize(1); err != nil {
				t.Fatal(err)
			}
			if err := g.DeleteNodes(kubeNodes(a.Nodes[:1])); err != nil {
				t.Fatal(err)
			}
			model, _ := e.p.Pricing()
			ni, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := model.NodePrice(ni.Node(), time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if n := e.sim.RequestCount(doks.OpUnknown); n != 0 {
				t.Errorf("%d requests went to paths DigitalOcean does not serve: %v", n, log.set())
			}
			want := godoPaths(t, a.ID, a.Name, a.Nodes[0].ID)
			want = append(want, "GET /v2/kubernetes/clusters/"+testCluster+"/node_pools_template/b")
			sort.Strings(want)
			if got := log.set(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests went to\n  %s\nwant godo's paths\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func kubeNodes(ns []*godo.KubernetesNode) []*apiv1.Node {
	out := make([]*apiv1.Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, kubeNode(n))
	}
	return out
}

// A path other than the API root (a proxy prefix) would be kept by some
// calls and dropped by others: it is refused at start-up, naming url.
func TestURLWithOtherPathRefused(t *testing.T) {
	for _, raw := range []string{"https://proxy.example/do/", "https://proxy.example/do", "https://host.example/v2/kubernetes", "https://host.example/v1"} {
		_, err := parseConfig([]byte(`{"cluster_id": "` + testCluster + `", "token": "t", "url": "` + raw + `"}`))
		if err == nil || !strings.HasPrefix(err.Error(), "url ") || !strings.Contains(err.Error(), "proxy path prefix is not supported") {
			t.Errorf("url %s: error %v, want a refusal naming url", raw, err)
		}
	}
	for _, raw := range []string{"https://api.digitalocean.com", "https://api.digitalocean.com/", "https://api.digitalocean.com/v2", "https://api.digitalocean.com/v2/"} {
		cfg, err := parseConfig([]byte(`{"cluster_id": "` + testCluster + `", "token": "t", "url": "` + raw + `"}`))
		if err != nil {
			t.Errorf("url %s: %v", raw, err)
		} else if cfg.baseURL != "https://api.digitalocean.com/" {
			t.Errorf("url %s: base URL %s, want the server root", raw, cfg.baseURL)
		}
	}
}

// The effective base URL is logged once at start-up, and a 404 from the
// API says which URL was called.
func TestBaseURLLoggedAnd404NamesTheURL(t *testing.T) {
	logs := captureLogs(t)
	e := newEnv(t, doks.Options{}, withURLSuffix("/v2/"))
	klog.Flush()
	root := e.hs.URL + "/"
	if n := logs.count('I', `apiBaseURL="`+root+`"`); n != 1 {
		t.Errorf("start-up logged the base URL %s %d times, want once", root, n)
	}
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: http.StatusNotFound})
	err := e.p.Refresh()
	want := "GET " + root + "v2/kubernetes/clusters/" + testCluster + "/node_pools: 404"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Refresh error %v, want one containing %q", err, want)
	}
}
