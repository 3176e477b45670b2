package scaleup

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// doksScaleUp is the DigitalOcean provider against the DOKS simulator over
// loopback HTTP, with node autoprovisioning of the given sizes, and a
// scale-up orchestrator over it.
type doksScaleUp struct {
	sim      *doks.Server
	provider cloudprovider.CloudProvider
	registry *clusterstate.Registry
	o        *Orchestrator
	opts     config.AutoscalingOptions
}

func newDOKSScaleUp(t *testing.T, simOpts doks.Options, sizes string, set func(*config.AutoscalingOptions)) *doksScaleUp {
	t.Helper()
	const cluster, token = "3f2a9c1e-0000-4000-8000-000000000001", "dop_v1_figures"
	simOpts.ClusterID, simOpts.Token = cluster, token
	sim := doks.NewServer(simOpts)
	hs := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { hs.Close(); sim.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cloud.json")
	body := fmt.Sprintf(`{"cluster_id": %q, "token": %q, "url": %q, "autoprovisioning": {"sizes": %s, "max_nodes_per_pool": 20}}`, cluster, token, hs.URL, sizes)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.CloudConfig = cfg
	opts.NodeAutoprovisioningEnabled = true
	if set != nil {
		set(&opts)
	}
	p, err := digitalocean.BuildDigitalOcean(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreatePool(doks.PoolSpec{Name: "base", Size: "s-2vcpu-4gb", Count: 1}); err != nil {
		t.Fatal(err)
	}
	d := &doksScaleUp{sim: sim, provider: p, opts: opts}
	d.registry = clusterstate.NewRegistry(p, opts)
	checker, err := simulator.NewPredicateChecker()
	if err != nil {
		t.Fatal(err)
	}
	d.o = New(opts, p, d.registry, expander.NewChain(nil, nil), checker, &countingRecorder{})
	return d
}

// loop is one iteration's scale-up: Refresh, the registry, then a
// scale-up of pods with the money limits in force.
func (d *doksScaleUp) loop(t *testing.T, pods []*apiv1.Pod, now time.Time) *Result {
	t.Helper()
	if err := d.provider.Refresh(); err != nil {
		t.Fatal(err)
	}
	if err := d.registry.UpdateNodes(nil, now); err != nil {
		t.Fatal(err)
	}
	limits, _ := resourcequotas.NewLimits(d.opts, d.provider)
	templates := map[string]*framework.NodeInfo{}
	for _, g := range d.provider.NodeGroups() {
		if ni, err := g.TemplateNodeInfo(); err == nil {
			templates[g.Id()] = ni
		}
	}
	res, err := d.o.ScaleUp(Input{Snapshot: simulator.NewClusterSnapshot(), Pods: pods, Templates: templates,
		Now: now, Quotas: resourcequotas.NewTracker(limits, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func gpuPendingPod(name string) *apiv1.Pod {
	p := test.BuildPendingPod(name, 1000, test.GiB, "rs-"+name)
	p.UID = types.UID(name)
	p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	p.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	p.Spec.Tolerations = []apiv1.Toleration{{Key: "nvidia.com/gpu", Operator: apiv1.TolerationOpExists, Effect: apiv1.TaintEffectNoSchedule}}
	return p
}

// Figure: a GPU pod whose first-choice size (the cheapest allowed) is out
// of capacity, two GPU sizes allowed, against the DOKS simulator. The
// second size is requested in the loop that met the refusal; the refused
// size gets one request per TTL.
func TestFigureNextSizeAfterACapacityRefusal(t *testing.T) {
	d := newDOKSScaleUp(t, doks.Options{BootDelay: -1}, `["gpu-l40sx1-48gb", "gpu-h100x1-80gb"]`, nil)
	d.sim.SetOutOfStock("gpu-l40sx1-48gb", time.Hour)
	start := time.Now()
	res := d.loop(t, []*apiv1.Pod{gpuPendingPod("train-0")}, start)
	took := time.Since(start)
	if !res.ScaledUp() {
		t.Fatal("no node requested in the loop that met the refusal")
	}
	var sizes []string
	for _, p := range d.sim.ListedPools() {
		sizes = append(sizes, p.Size)
	}
	if d.sim.StockRefusals("gpu-l40sx1-48gb") != 1 || d.sim.RequestCount(doks.OpCreateNodePool) != 2 {
		t.Fatalf("refusals %d, creates %d, pools %v", d.sim.StockRefusals("gpu-l40sx1-48gb"), d.sim.RequestCount(doks.OpCreateNodePool), sizes)
	}
	// Three more loops within the TTL, each with a new pod: no request for
	// the refused size.
	for i := 1; i <= 3; i++ {
		d.loop(t, []*apiv1.Pod{gpuPendingPod(fmt.Sprintf("train-%d", i))}, start.Add(time.Duration(i)*20*time.Second))
	}
	refusals := d.sim.StockRefusals("gpu-l40sx1-48gb")
	if refusals != 1 {
		t.Fatalf("%d requests for the refused size within the TTL, want 1", refusals)
	}
	t.Logf("FIGURE next-size: pending to the second size's create request: the same loop (0 extra loops, %s wall time against the simulator); pools %v; creates sent for the refused (size, region) in 4 loops within the TTL: %d",
		took.Round(time.Millisecond), sizes, refusals)
}

// Figure: a burst of 40 pods of 1.5 vCPU under --max-hourly-cost $0.50/h,
// sizes s-* allowed; spend (each group's target × price) sampled after
// every loop never exceeds the limit, and the pods that fit under it get
// nodes.
func TestFigureBurstUnderASpendingLimit(t *testing.T) {
	const limit = 0.5
	d := newDOKSScaleUp(t, doks.Options{BootDelay: -1}, `["s-*"]`, func(o *config.AutoscalingOptions) { o.MaxHourlyCost = limit })
	var pods []*apiv1.Pod
	for i := range 40 {
		p := test.BuildPendingPod(fmt.Sprintf("burst-%d", i), 1500, test.GiB, "burst")
		p.UID = types.UID(p.Name)
		pods = append(pods, p)
	}
	start := time.Now()
	var samples []float64
	maxSpend := 0.0
	for i := range 6 {
		d.loop(t, pods, start.Add(time.Duration(i)*10*time.Second))
		spend := 0.0
		for _, p := range d.sim.ListedPools() {
			if p.Name == "base" {
				continue // not autoscaled: the limit does not count it
			}
			price, _ := doks.SizePrice(p.Size)
			spend += price * float64(p.Count)
		}
		samples = append(samples, spend)
		maxSpend = max(maxSpend, spend)
		if spend > limit+1e-9 {
			t.Fatalf("loop %d: spend $%.4f/h above the limit $%.2f/h", i, spend, limit)
		}
	}
	placed := 0
	for _, p := range d.sim.ListedPools() {
		if p.Name != "base" {
			placed += p.Count
		}
	}
	t.Logf("FIGURE spend-limit: 40 pods of 1.5 vCPU, --max-hourly-cost $%.2f/h: spend of the created pools after each of 6 loops $%.4f (max $%.4f, never above); %d nodes bought; pools %v",
		limit, samples, maxSpend, placed, poolSizes(d.sim))
}

func poolSizes(sim *doks.Server) []string {
	var out []string
	for _, p := range sim.ListedPools() {
		out = append(out, fmt.Sprintf("%s×%d", p.Size, p.Count))
	}
	return out
}

// Figure: the droplet quota reached under a burst. The account has 5
// droplets of a limit of 6 (4 outside the cluster, the base pool's 1):
// one node is bought, and the loops after it send no create or resize,
// so DigitalOcean answers no 422.
func TestFigureDropletQuotaUnderABurst(t *testing.T) {
	d := newDOKSScaleUp(t, doks.Options{BootDelay: -1, DropletLimit: 6}, `["s-*"]`, nil)
	d.sim.SetOtherDroplets(4)
	var pods []*apiv1.Pod
	for i := range 10 {
		p := test.BuildPendingPod(fmt.Sprintf("burst-%d", i), 1500, test.GiB, "burst")
		p.UID = types.UID(p.Name)
		pods = append(pods, p)
	}
	start := time.Now()
	for i := range 5 {
		d.loop(t, pods, start.Add(time.Duration(i)*10*time.Second))
	}
	writes := d.sim.RequestCount(doks.OpCreateNodePool) + d.sim.RequestCount(doks.OpUpdateNodePool)
	nodes := 0
	for _, p := range d.sim.ListedPools() {
		nodes += p.Count
	}
	if nodes != 2 || writes != 1 {
		t.Fatalf("cluster droplets %d (want 2: base + 1 bought), writes %d (want 1)", nodes, writes)
	}
	t.Logf("FIGURE droplet-quota: limit 6, 5 droplets: 5 loops of a 10-pod burst sent %d write (the one node that fits), no write past the limit (no 422); reads: %d GET /v2/account, %d GET /v2/droplets",
		writes, d.sim.RequestCount(doks.OpGetAccount), d.sim.RequestCount(doks.OpListDroplets))
}
