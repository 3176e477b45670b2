package expander_test

import (
	"math/rand"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/expander"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/factory"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/priority"
)

type fixture struct {
	provider *test.Provider
	options  []expander.Option
}

// newFixture returns three groups with different node sizes; each option hosts
// `pods` pods of 500m / 1GiB.
func newFixture(t *testing.T) *fixture {
	p := test.NewProvider()
	mk := func(id string, cpu, mem int64, nodes, pods int) expander.Option {
		tmpl := test.BuildTemplate(id, cpu, mem, nil)
		g := p.AddNodeGroup(id, 0, 10, 0, tmpl)
		var ps []*apiv1.Pod
		for i := 0; i < pods; i++ {
			ps = append(ps, test.BuildPendingPod(id+"-p", 500, test.GiB, "rs"))
		}
		return expander.Option{NodeGroup: g, NodeCount: nodes, Pods: ps, NodeInfo: tmpl}
	}
	return &fixture{provider: p, options: []expander.Option{
		// small: 2 nodes of 1cpu/2GiB for 4 pods → no waste
		mk("small", 1000, 2*test.GiB, 2, 4),
		// big: 1 node of 8cpu/32GiB for 4 pods → lots of waste
		mk("big", 8000, 32*test.GiB, 1, 4),
		// medium: 1 node 4cpu/8GiB for 6 pods
		mk("medium", 4000, 8*test.GiB, 1, 6),
	}}
}

func configMapLister(objs ...*apiv1.ConfigMap) (cache.Indexer, corelisters.ConfigMapNamespaceLister) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		_ = idx.Add(o)
	}
	return idx, corelisters.NewConfigMapLister(idx).ConfigMaps("kube-system")
}

func priorityCM(version, data string) *apiv1.ConfigMap {
	return &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.ConfigMapName, Namespace: "kube-system", ResourceVersion: version},
		Data:       map[string]string{priority.ConfigMapKey: data},
	}
}

func TestExpanderChoices(t *testing.T) {
	pricing := &test.PricingModel{
		// big is cheap per hour; small is expensive.
		NodePrices:     map[string]float64{"small": 1.0, "big": 0.5, "medium": 0.9},
		PodPerCoreHour: 0.1,
	}
	cases := []struct {
		name      string
		expanders []string
		cm        *apiv1.ConfigMap
		pricing   bool
		want      string
	}{
		{name: "most-pods", expanders: []string{"most-pods"}, want: "medium"},
		// small: waste 0+0; medium: cpu (4-3)/4=.25, mem (8-6)/8=.25 → .5; big: large.
		{name: "least-waste", expanders: []string{"least-waste"}, want: "small"},
		// small 2.0/0.2 = 10, big 0.5/0.2 = 2.5, medium 0.9/0.3 = 3.
		{name: "price", expanders: []string{"price"}, pricing: true, want: "big"},
		{name: "price without pricing passes on to least-waste", expanders: []string{"price", "least-waste"}, want: "small"},
		{name: "priority highest wins", expanders: []string{"priority"},
			cm: priorityCM("1", "10:\n  - ^big$\n50:\n  - med.*\n"), want: "medium"},
		{name: "priority ties go to next filter", expanders: []string{"priority", "least-waste"},
			cm: priorityCM("1", "10:\n  - big\n50:\n  - medium\n  - small\n"), want: "small"},
		{name: "priority bad yaml passes all", expanders: []string{"priority", "most-pods"},
			cm: priorityCM("1", "{not: [valid"), want: "medium"},
		{name: "priority non-integer key passes all", expanders: []string{"priority", "least-waste"},
			cm: priorityCM("1", "high:\n  - big\n"), want: "small"},
		{name: "priority missing configmap passes all", expanders: []string{"priority", "most-pods"}, want: "medium"},
		{name: "priority nothing matches passes all", expanders: []string{"priority", "least-waste"},
			cm: priorityCM("1", "10:\n  - nomatch\n"), want: "small"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.pricing {
				f.provider.SetPricing(pricing)
			}
			var cms []*apiv1.ConfigMap
			if tc.cm != nil {
				cms = append(cms, tc.cm)
			}
			_, lister := configMapLister(cms...)
			s, err := factory.Build(tc.expanders, f.provider, lister, nil, rand.New(rand.NewSource(1)), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := s.BestOption(f.options)
			if got == nil || got.NodeGroup.Id() != tc.want {
				t.Fatalf("best = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestPriorityReloadsOnChange(t *testing.T) {
	f := newFixture(t)
	idx, lister := configMapLister(priorityCM("1", "100:\n  - ^big$\n"))
	s, err := factory.Build([]string{"priority"}, f.provider, lister, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.BestOption(f.options).NodeGroup.Id(); got != "big" {
		t.Fatalf("before update: %s, want big", got)
	}
	_ = idx.Update(priorityCM("2", "100:\n  - ^small$\n1:\n  - .*\n"))
	if got := s.BestOption(f.options).NodeGroup.Id(); got != "small" {
		t.Fatalf("after update: %s, want small", got)
	}
	_ = idx.Delete(priorityCM("2", ""))
	// No ConfigMap: every option is equal, the chain picks one of them.
	if s.BestOption(f.options) == nil {
		t.Fatal("no option after ConfigMap deletion")
	}
}

func TestRandomAndChainEdgeCases(t *testing.T) {
	f := newFixture(t)
	s, err := factory.Build([]string{"random"}, f.provider, nil, nil, rand.New(rand.NewSource(7)), clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		seen[s.BestOption(f.options).NodeGroup.Id()] = true
	}
	if len(seen) < 2 {
		t.Fatalf("random expander always chose %v", seen)
	}
	if s.BestOption(nil) != nil {
		t.Fatal("BestOption(nil) != nil")
	}
	for _, bad := range [][]string{{"grpc"}, {"least-waste", "least-waste"}, {"priority"}} {
		if _, err := factory.Build(bad, f.provider, nil, nil, nil, nil); err == nil {
			t.Errorf("Build(%v) succeeded", bad)
		}
	}
}

func TestPriceTieBreak(t *testing.T) {
	f := newFixture(t)
	// Equal price per pod resource everywhere: the tie-break keeps the option
	// placing the most pods.
	f.provider.SetPricing(&test.PricingModel{PerCoreHour: 1, PodPerCoreHour: 1})
	s, _ := factory.Build([]string{"price"}, f.provider, nil, nil, rand.New(rand.NewSource(1)), nil)
	// small: 2 cores / 2 pod-cores = 1; medium: 4/3; big: 8/2.
	if got := s.BestOption(f.options).NodeGroup.Id(); got != "small" {
		t.Fatalf("got %s, want small", got)
	}
	opts := []expander.Option{f.options[0], f.options[0]}
	opts[1].Pods = append(opts[1].Pods, opts[1].Pods[0])
	opts[1].NodeCount = 2
	// Same node cost; second places 5 pods (score 2/2.5 < 2/2) so it wins outright.
	if got := s.BestOption(opts); len(got.Pods) != 5 {
		t.Fatalf("got option with %d pods, want 5", len(got.Pods))
	}
}
