package consolidation_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
)

type noDrain struct{ drained int }

func (d *noDrain) Drain(_ context.Context, nodes []*scaledown.UnneededNode) { d.drained += len(nodes) }

// A replacement's pool creation applied by DigitalOcean but answered 504 is
// not sent again, while the command waits nor after it gives up: the pool
// counts as coming (its node upcoming), which keeps the next plan back.
// The real provider over godo against the DOKS simulator.
func TestReplacementCreateWithLostAnswerMakesOnePool(t *testing.T) {
	sim := doks.NewServer(doks.Options{ClusterID: "123e4567-e89b-12d3-a456-426614174000", Token: "tok", BootDelay: -1})
	hs := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { hs.Close(); sim.Close() })
	if _, err := sim.CreatePool(doks.PoolSpec{Name: "big", Size: "s-8vcpu-16gb", Count: 1, AutoScale: true, MaxNodes: 3,
		Tags: []string{digitalocean.TagConsolidate}}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "cloud.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "tok", "url": %q,
		"autoprovisioning": {"sizes": ["s-2vcpu-4gb"], "max_nodes_per_pool": 4}}`, hs.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.CloudConfig, opts.NodeAutoprovisioningEnabled = cfg, true
	p, err := digitalocean.BuildDigitalOcean(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup() })
	now := time.Now()
	registry := clusterstate.NewRegistry(p, opts)
	refresh := func(at time.Time) {
		t.Helper()
		if err := p.Refresh(); err != nil {
			t.Fatal(err)
		}
		if err := registry.UpdateNodes(nil, at); err != nil {
			t.Fatal(err)
		}
	}
	refresh(now)
	orch := scaleup.New(opts, p, registry, nil, sdtest.Checker(t),
		report.New(report.Deps{Provider: p, Registry: registry, Events: record.NewFakeRecorder(100), Status: &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "status"}}))

	g, err := p.NewNodeGroup("s-2vcpu-4gb", nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := g.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	old := test.BuildNode("big-node", 8000, 16*test.GiB)
	cmd := consolidation.Command{Kind: consolidation.Replace, Count: 1, RemovedPrice: 0.143, Saving: 0.107,
		Remove:      []consolidation.Candidate{{Node: old, GroupID: "big", Price: 0.143, Pods: 1}},
		Replacement: &consolidation.Replacement{Group: g, Template: tmpl, Size: "s-2vcpu-4gb", Price: 0.036, Room: 4}}
	view := func(at time.Time) consolidation.View {
		return consolidation.View{Nodes: []*apiv1.Node{old}, Ready: func(*apiv1.Node) bool { return true },
			Snapshot: simulator.NewClusterSnapshot(), Checker: sdtest.Checker(t), Now: at}
	}

	sim.InjectFault(doks.Fault{Operation: doks.OpCreateNodePool, Status: 504, Applied: true, Times: 1})
	dr := &noDrain{}
	e := consolidation.NewExecutor(orch, dr, func(*consolidation.Replacement) time.Duration { return 10 * time.Minute })
	ctx := context.Background()
	if out := e.Start(ctx, cmd, view(now)); out != nil {
		t.Fatalf("a lost answer is no failure: the pool may exist; got %+v", out)
	}
	var out []consolidation.Outcome
	for i := 1; i <= 4 && out == nil; i++ {
		at := now.Add(time.Duration(i) * 4 * time.Minute)
		refresh(at)
		out = e.Step(ctx, view(at))
	}
	if len(out) != 1 || out[0].Result != consolidation.Aborted {
		t.Fatalf("got %+v, want the command aborted after the provision timeout (the node never boots)", out)
	}
	if n := sim.Faulted(doks.OpCreateNodePool); n != 1 {
		t.Fatalf("the creation met %d fault(s), want its answer lost once", n)
	}
	if n := sim.RequestCount(doks.OpCreateNodePool); n != 1 {
		t.Errorf("%d pool creations sent, want 1", n)
	}
	created := 0
	for _, l := range sim.PoolHistory() {
		if l.ByAPI {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d pools created, want 1", created)
	}
	upcoming := 0
	for _, gs := range registry.NodeGroups() {
		upcoming += gs.Upcoming
	}
	if upcoming < 1 {
		t.Error("the created pool's node does not count as upcoming: the next plan would not wait for it")
	}
	if dr.drained != 0 {
		t.Errorf("%d node(s) drained by an aborted replacement", dr.drained)
	}
}
