package digitalocean

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
	"github.com/doks-autoscaler/cluster-autoscaler/version"
)

func autoscaled(name string, count, min, max int) doks.PoolSpec {
	return doks.PoolSpec{Name: name, Size: "s-2vcpu-4gb", Count: count, AutoScale: true, MinNodes: min, MaxNodes: max}
}

func TestRefreshListsEveryPageAndCachesTemplates(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pageSize     int
		listRequests int // per Refresh
	}{
		{"20 per page", 20, 3},
		{"default 200 per page", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []envOption
			if tc.pageSize > 0 {
				opts = append(opts, withPageSize(tc.pageSize))
			}
			e := newEnv(t, doks.Options{}, opts...)
			for i := 0; i < 45; i++ {
				e.pool(autoscaled(fmt.Sprintf("pool-%02d", i), 1, 0, 5))
			}
			for i := 0; i < 3; i++ {
				e.pool(doks.PoolSpec{Name: fmt.Sprintf("fixed-%d", i), Size: "s-1vcpu-2gb", Count: 2})
			}
			e.refresh()
			if n := len(e.p.NodeGroups()); n != 45 {
				t.Fatalf("%d node groups, want 45", n)
			}
			if got := e.sim.RequestCount(doks.OpListNodePools); got != tc.listRequests {
				t.Errorf("first Refresh: %d list requests, want %d", got, tc.listRequests)
			}
			if got := e.sim.RequestCount(doks.OpGetNodePoolTemplate); got != 45 {
				t.Errorf("first Refresh: %d template requests, want 45", got)
			}
			for i := 0; i < 3; i++ {
				before := e.sim.TotalRequests()
				e.refresh()
				if got := e.sim.TotalRequests() - before; got != tc.listRequests {
					t.Errorf("steady-state Refresh %d: %d requests, want %d", i+2, got, tc.listRequests)
				}
			}
			if len(e.p.NodeGroups()) != 45 {
				t.Errorf("node groups changed in steady state")
			}
		})
	}
}

func TestNoAutoscaledPools(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(doks.PoolSpec{Name: "fixed", Size: "s-1vcpu-2gb", Count: 1})
	e.refresh()
	if n := len(e.p.NodeGroups()); n != 0 {
		t.Errorf("%d node groups, want 0", n)
	}
	if e.sim.RequestCount(doks.OpGetNodePoolTemplate) != 0 {
		t.Error("templates fetched for a pool without autoscaling")
	}
}

func TestTemplateRefetchedOnSpecChangeAndTTL(t *testing.T) {
	e := newEnv(t, doks.Options{})
	a := e.pool(autoscaled("a", 1, 1, 3))
	e.pool(autoscaled("b", 1, 1, 3))
	e.refresh()
	templates := func() int { return e.sim.RequestCount(doks.OpGetNodePoolTemplate) }
	if templates() != 2 {
		t.Fatalf("%d template requests, want 2", templates())
	}

	// A label change refetches that pool's template only.
	if _, _, err := e.godoClient().Kubernetes.UpdateNodePool(context.Background(), testCluster, a.ID,
		&godo.KubernetesNodePoolUpdateRequest{Labels: map[string]string{"team": "blue"}}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	if templates() != 3 {
		t.Fatalf("after label change: %d template requests, want 3", templates())
	}
	ni, err := e.group(a.ID).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if ni.Node().Labels["team"] != "blue" {
		t.Errorf("template labels %v lack team=blue", ni.Node().Labels)
	}

	// A taint change too.
	taints := []godo.Taint{{Key: "dedicated", Value: "x", Effect: "NoSchedule"}}
	if _, _, err := e.godoClient().Kubernetes.UpdateNodePool(context.Background(), testCluster, a.ID,
		&godo.KubernetesNodePoolUpdateRequest{Taints: &taints}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	if templates() != 4 {
		t.Fatalf("after taint change: %d template requests, want 4", templates())
	}
	ni, _ = e.group(a.ID).TemplateNodeInfo()
	if len(ni.Node().Spec.Taints) != 1 || ni.Node().Spec.Taints[0].Key != "dedicated" {
		t.Errorf("template taints %v", ni.Node().Spec.Taints)
	}

	// A count change alone does not.
	e.refresh()
	if templates() != 4 {
		t.Errorf("unchanged pools: %d template requests, want 4", templates())
	}

	// After the TTL every template is fetched again, once.
	e.advance(61 * time.Minute)
	e.refresh()
	e.refresh()
	if templates() != 6 {
		t.Errorf("after TTL: %d template requests, want 6", templates())
	}
}

func TestTemplateFailureKeepsOtherPools(t *testing.T) {
	e := newEnv(t, doks.Options{})
	a := e.pool(autoscaled("a", 1, 0, 3))
	b := e.pool(autoscaled("b", 1, 0, 3))
	// 404 is not retried: the first template request fails once.
	e.sim.InjectFault(doks.Fault{Operation: doks.OpGetNodePoolTemplate, Status: 404, Times: 1})
	e.refresh()
	if n := len(e.p.NodeGroups()); n != 2 {
		t.Fatalf("%d node groups, want 2 (a failed template must not drop pools)", n)
	}
	_, errA := e.group(a.ID).TemplateNodeInfo()
	_, errB := e.group(b.ID).TemplateNodeInfo()
	if errA == nil || !strings.Contains(errA.Error(), "has no template") {
		t.Errorf("pool a: TemplateNodeInfo error %v, want no template", errA)
	}
	if errB != nil {
		t.Errorf("pool b: %v", errB)
	}
	if sz, _ := e.group(a.ID).TargetSize(); sz != 1 {
		t.Errorf("pool a target %d", sz)
	}

	// Retried at the next Refresh.
	before := e.sim.RequestCount(doks.OpGetNodePoolTemplate)
	e.refresh()
	if got := e.sim.RequestCount(doks.OpGetNodePoolTemplate) - before; got != 1 {
		t.Errorf("next Refresh fetched %d templates, want 1 (the failed one)", got)
	}
	if _, err := e.group(a.ID).TemplateNodeInfo(); err != nil {
		t.Errorf("pool a after retry: %v", err)
	}

	// A pool that had a template keeps it when a refetch fails.
	if _, _, err := e.godoClient().Kubernetes.UpdateNodePool(context.Background(), testCluster, b.ID,
		&godo.KubernetesNodePoolUpdateRequest{Labels: map[string]string{"v": "2"}}); err != nil {
		t.Fatal(err)
	}
	e.sim.InjectFault(doks.Fault{Operation: doks.OpGetNodePoolTemplate, Status: 403, Times: 1})
	e.refresh()
	ni, err := e.group(b.ID).TemplateNodeInfo()
	if err != nil {
		t.Fatalf("pool b lost its template: %v", err)
	}
	// The pool's current labels apply on top of the kept template.
	if ni.Node().Labels["v"] != "2" {
		t.Errorf("labels %v lack the pool's v=2", ni.Node().Labels)
	}
	before = e.sim.RequestCount(doks.OpGetNodePoolTemplate)
	e.refresh()
	e.refresh()
	if got := e.sim.RequestCount(doks.OpGetNodePoolTemplate) - before; got != 1 {
		t.Errorf("%d template requests in two Refreshes after the failure, want 1 (the retry)", got)
	}
}

func TestIncreaseSize(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1})
	p := e.pool(autoscaled("a", 1, 1, 4))
	e.refresh()
	g := e.group(p.ID)

	for _, delta := range []int{0, -1, 4} {
		before := e.sim.TotalRequests()
		if err := g.IncreaseSize(delta); err == nil {
			t.Errorf("IncreaseSize(%d) accepted", delta)
		}
		if e.sim.TotalRequests() != before {
			t.Errorf("IncreaseSize(%d) refused but made %d API calls", delta, e.sim.TotalRequests()-before)
		}
	}
	if err := g.IncreaseSize(3); err != nil {
		t.Fatal(err)
	}
	if sz, _ := g.TargetSize(); sz != 4 {
		t.Errorf("target %d, want 4", sz)
	}
	if got := e.simPool(p.ID).Count; got != 4 {
		t.Errorf("DOKS count %d, want 4", got)
	}
	inst, _ := g.Nodes()
	creating := 0
	for _, i := range inst {
		if i.Status.State == cloudprovider.InstanceCreating {
			creating++
		}
	}
	if len(inst) != 4 || creating != 3 {
		t.Errorf("instances %d (creating %d), want 4 (3) right after the resize", len(inst), creating)
	}
	if err := g.IncreaseSize(1); err == nil {
		t.Error("IncreaseSize past max accepted")
	}
}

// The atomic increase is one UpdateNodePool of the whole delta, and one
// past max_nodes makes no call at all.
func TestAtomicIncreaseSizeIsOneUpdate(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 1, 1, 8))
	e.refresh()
	g := e.group(p.ID)
	if err := g.AtomicIncreaseSize(8); err == nil {
		t.Fatal("AtomicIncreaseSize past max accepted")
	}
	if n := e.sim.RequestCount(doks.OpUpdateNodePool); n != 0 {
		t.Fatalf("refused atomic increase made %d UpdateNodePool calls", n)
	}
	if err := g.AtomicIncreaseSize(6); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.RequestCount(doks.OpUpdateNodePool); n != 1 {
		t.Errorf("UpdateNodePool calls = %d, want 1", n)
	}
	if got := e.simPool(p.ID).Count; got != 7 {
		t.Errorf("DOKS count %d, want 7", got)
	}
}

func TestIncreaseSizeAtTheDropletLimitIsAnAccountLimit(t *testing.T) {
	e := newEnv(t, doks.Options{DropletLimit: 2})
	p := e.pool(autoscaled("a", 1, 1, 4))
	e.refresh()
	g := e.group(p.ID)
	err := g.IncreaseSize(2)
	al, ok := cloudprovider.AsAccountLimit(err)
	if !ok {
		t.Fatalf("IncreaseSize over the droplet limit: %v, want an AccountLimitError", err)
	}
	if al.Code != ErrorCodeDropletLimit || al.Message != doks.DropletLimitMessage {
		t.Errorf("code %q message %q, want %q and DigitalOcean's words %q", al.Code, al.Message, ErrorCodeDropletLimit, doks.DropletLimitMessage)
	}
	if !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), p.Name) {
		t.Errorf("error %q should name the pool and the status", err)
	}
	// Another 422 is the pool's own problem, not the account's.
	e.sim.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, Status: 422, Message: "node count is outside the autoscaling range", Times: 1})
	if err := g.IncreaseSize(1); err == nil {
		t.Fatal("injected 422 accepted")
	} else if _, ok := cloudprovider.AsAccountLimit(err); ok {
		t.Errorf("a 422 without the droplet limit is taken for one: %v", err)
	}
}

func TestIncreaseSizeErrorsKeepCache(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 1, 1, 4))
	e.refresh()
	g := e.group(p.ID)
	e.sim.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, Status: 422, Message: "droplet limit reached", Times: 1})
	err := g.IncreaseSize(1)
	if err == nil || !strings.Contains(err.Error(), "droplet limit reached") {
		t.Fatalf("error %v should carry DOKS's message", err)
	}
	if sz, _ := g.TargetSize(); sz != 1 {
		t.Errorf("failed increase changed the cached target to %d", sz)
	}
	if e.sim.RequestCount(doks.OpUpdateNodePool) != 1 {
		t.Errorf("422 retried: %d requests", e.sim.RequestCount(doks.OpUpdateNodePool))
	}

	// A DOKS answer with another count is an error and leaves the cache.
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"node_pool":{"id":%q,"name":"a","count":1}}`, p.ID)
		return true
	})
	if err := g.IncreaseSize(2); err == nil || !strings.Contains(err.Error(), "answered 1") {
		t.Errorf("mismatched count: %v", err)
	}
	if sz, _ := g.TargetSize(); sz != 1 {
		t.Errorf("cached target %d after a mismatched answer", sz)
	}
}

// A 202 whose body holds no pool ("{}", empty, a null pool) accepted the
// count: the pool is read back and the increase succeeds, not failing a
// write DOKS applied (which would back the group off while its nodes
// come). The PUT is sent once.
func TestIncreaseSizeAnsweredWithoutThePool(t *testing.T) {
	for _, body := range []string{"{}", "", `{"node_pool":null}`} {
		t.Run(fmt.Sprintf("%q", body), func(t *testing.T) {
			e := newEnv(t, doks.Options{BootDelay: -1})
			p := e.pool(autoscaled("a", 1, 1, 4))
			e.refresh()
			g := e.group(p.ID)
			e.sim.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, ReplaceBody: true, Body: body, Times: 1})
			if err := g.IncreaseSize(2); err != nil {
				t.Fatalf("IncreaseSize answered 202 %q: %v, want success", body, err)
			}
			if sz, _ := g.TargetSize(); sz != 3 {
				t.Errorf("target %d, want 3", sz)
			}
			if inst, _ := g.Nodes(); len(inst) != 3 {
				t.Errorf("%d instances, want the 3 the pool read back holds", len(inst))
			}
			if got := e.simPool(p.ID).Count; got != 3 {
				t.Errorf("DOKS count %d, want 3", got)
			}
			if n := e.sim.RequestCount(doks.OpUpdateNodePool); n != 1 {
				t.Errorf("%d UpdateNodePool requests, want 1", n)
			}
			if n := e.sim.RequestCount(doks.OpGetNodePool); n != 1 {
				t.Errorf("%d GetNodePool requests, want 1 (the pool read back)", n)
			}
		})
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	e := newEnv(t, doks.Options{BootDelay: -1})
	p := e.pool(autoscaled("a", 2, 1, 6))
	e.refresh()
	g := e.group(p.ID)
	if err := g.IncreaseSize(3); err != nil { // 2 running + 3 provisioning
		t.Fatal(err)
	}
	for _, tc := range []struct {
		delta int
		want  string
	}{
		{0, "must be negative"},
		{1, "must be negative"},
		{-5, "min 1"},
		{-4, "2 nodes are running"},
	} {
		before := e.sim.TotalRequests()
		err := g.DecreaseTargetSize(tc.delta)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecreaseTargetSize(%d): %v, want %q", tc.delta, err, tc.want)
		}
		if e.sim.TotalRequests() != before {
			t.Errorf("DecreaseTargetSize(%d) refused but made API calls", tc.delta)
		}
	}
	if err := g.DecreaseTargetSize(-3); err != nil {
		t.Fatal(err)
	}
	if sz, _ := g.TargetSize(); sz != 2 {
		t.Errorf("target %d, want 2", sz)
	}
	sp := e.simPool(p.ID)
	running := 0
	for _, n := range sp.Nodes {
		if n.Status.State == doks.StateRunning {
			running++
		}
	}
	if sp.Count != 2 || running != 2 {
		t.Errorf("DOKS count %d running %d, want 2 and 2 (the provisioning nodes go)", sp.Count, running)
	}
}

// Each Refresh makes new group objects. A deletion on the previous
// Refresh's group must not leave this one scaling up from a count it no
// longer has: the update sends 4 + 1, not the listed 5 + 1.
func TestCountChangesSeenAcrossRefreshes(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 5, 0, 10))
	e.refresh()
	older := e.group(p.ID)
	e.refresh()
	newer := e.group(p.ID)
	if older == newer {
		t.Fatal("the test needs two group objects of the pool")
	}
	if err := older.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0])}); err != nil {
		t.Fatal(err)
	}
	if ts, _ := newer.TargetSize(); ts != 4 {
		t.Errorf("the newer group's target = %d, want 4", ts)
	}
	if err := newer.IncreaseSize(1); err != nil {
		t.Fatal(err)
	}
	if got := e.simPool(p.ID).Count; got != 5 {
		t.Errorf("pool count = %d after deleting one of 5 and adding one, want 5", got)
	}
	// A Refresh brings the groups back in line with DOKS.
	e.refresh()
	if ts, _ := e.group(p.ID).TargetSize(); ts != 5 {
		t.Errorf("target after Refresh = %d, want 5", ts)
	}
}

func TestDeleteNodes(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1})
	p := e.pool(autoscaled("a", 4, 2, 5))
	other := e.pool(autoscaled("b", 1, 0, 5))
	e.refresh()
	g := e.group(p.ID)

	unlabelled := kubeNode(p.Nodes[0])
	delete(unlabelled.Labels, LabelNodeID)
	foreign := kubeNode(other.Nodes[0])
	for _, tc := range []struct {
		name  string
		nodes []*apiv1.Node
		want  string
	}{
		{"no node-id label", []*apiv1.Node{kubeNode(p.Nodes[1]), unlabelled}, "has no doks.digitalocean.com/node-id label"},
		{"other pool", []*apiv1.Node{foreign}, "does not belong to node pool a"},
		{"below min", []*apiv1.Node{kubeNode(p.Nodes[0]), kubeNode(p.Nodes[1]), kubeNode(p.Nodes[2])}, "below the minimum of 2"},
	} {
		before := e.sim.TotalRequests()
		err := g.DeleteNodes(tc.nodes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if e.sim.TotalRequests() != before {
			t.Errorf("%s: refused but made API calls", tc.name)
		}
	}

	if err := g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[3])}); err != nil {
		t.Fatal(err)
	}
	if sz, _ := g.TargetSize(); sz != 3 {
		t.Errorf("target %d, want 3", sz)
	}
	sp := e.simPool(p.ID)
	if sp.Count != 3 {
		t.Errorf("DOKS count %d, want 3", sp.Count)
	}
	for _, n := range sp.Nodes {
		if n.ID == p.Nodes[3].ID && n.Status.State != doks.StateDeleting {
			// draining would mean DOKS drains the node a second time.
			t.Errorf("deleted node is %s, want deleting (skip_drain)", n.Status.State)
		}
	}
	// Found by provider ID when the label names no node of the pool.
	byPID := kubeNode(p.Nodes[2])
	byPID.Labels[LabelNodeID] = "stale-id"
	if err := g.DeleteNodes([]*apiv1.Node{byPID}); err != nil {
		t.Fatalf("delete by provider ID: %v", err)
	}
	if sz, _ := g.TargetSize(); sz != 2 {
		t.Errorf("target %d, want 2", sz)
	}
}

// The core deletes instances that never became Nodes through placeholders
// that carry only the provider ID and upstream's fake-node annotation.
func TestDeleteNodesUnregisteredPlaceholder(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1})
	p := e.pool(autoscaled("a", 3, 1, 5))
	other := e.pool(autoscaled("b", 1, 0, 5))
	e.refresh()
	g := e.group(p.ID)
	placeholder := func(n *godo.KubernetesNode) *apiv1.Node {
		node := &apiv1.Node{}
		node.Name = "digitalocean://" + n.DropletID
		node.Spec.ProviderID = node.Name
		node.Annotations = map[string]string{cloudprovider.FakeNodeReasonAnnotation: cloudprovider.FakeNodeUnregistered}
		return node
	}
	before := e.sim.TotalRequests()
	if err := g.DeleteNodes([]*apiv1.Node{placeholder(other.Nodes[0])}); err == nil || !strings.Contains(err.Error(), "is not a node of node pool a") {
		t.Errorf("placeholder of another pool: %v", err)
	}
	if e.sim.TotalRequests() != before {
		t.Error("refused placeholder made API calls")
	}
	if err := g.DeleteNodes([]*apiv1.Node{placeholder(p.Nodes[2])}); err != nil {
		t.Fatal(err)
	}
	if got := e.simPool(p.ID).Count; got != 2 {
		t.Errorf("DOKS count %d after deleting the unregistered instance, want 2", got)
	}
}

func TestDeleteNodesFailureMidway(t *testing.T) {
	e := newEnv(t, doks.Options{DeleteDelay: -1})
	p := e.pool(autoscaled("a", 4, 0, 5))
	e.refresh()
	g := e.group(p.ID)
	deletes := 0
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodDelete {
			return false
		}
		deletes++
		if deletes == 2 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"id":"forbidden","message":"nope"}`)
			return true
		}
		return false
	})
	err := g.DeleteNodes([]*apiv1.Node{kubeNode(p.Nodes[0]), kubeNode(p.Nodes[1]), kubeNode(p.Nodes[2])})
	if err == nil || !strings.Contains(err.Error(), "(2 of 3)") {
		t.Fatalf("error %v, want failure at the second node", err)
	}
	if sz, _ := g.TargetSize(); sz != 3 {
		t.Errorf("target %d after one successful delete, want 3", sz)
	}
	if got := e.simPool(p.ID).Count; got != 3 {
		t.Errorf("DOKS count %d, want 3", got)
	}
}

func TestInstanceStateMapping(t *testing.T) {
	cases := []struct {
		status    *godo.KubernetesNodeStatus
		state     cloudprovider.InstanceState
		errorInfo bool
		message   string
	}{
		{&godo.KubernetesNodeStatus{State: "provisioning"}, cloudprovider.InstanceCreating, false, ""},
		{&godo.KubernetesNodeStatus{State: "running"}, cloudprovider.InstanceRunning, false, ""},
		{&godo.KubernetesNodeStatus{State: "draining"}, cloudprovider.InstanceDeleting, false, ""},
		{&godo.KubernetesNodeStatus{State: "deleting"}, cloudprovider.InstanceDeleting, false, ""},
		{&godo.KubernetesNodeStatus{State: "error", Message: "droplet create failed"}, 0, true, "droplet create failed"},
		{&godo.KubernetesNodeStatus{State: ""}, 0, true, `node is in state ""`},
		{nil, 0, true, `node is in state ""`},
	}
	for _, c := range cases {
		got := instanceStatus(c.status)
		if got.State != c.state || (got.ErrorInfo != nil) != c.errorInfo {
			t.Errorf("%+v: got %+v", c.status, got)
			continue
		}
		if c.errorInfo {
			ei := got.ErrorInfo
			if ei.ErrorClass != cloudprovider.OtherErrorClass || ei.ErrorCode != "no-code-digitalocean" || ei.ErrorMessage != c.message {
				t.Errorf("%+v: error info %+v", c.status, ei)
			}
		}
	}

	// Through the API: a node DOKS reports in an unknown state.
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 2, 0, 3))
	if err := e.sim.SetNodeState(p.ID, p.Nodes[1].ID, "error", "quota exceeded"); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	inst, err := e.group(p.ID).Nodes()
	if err != nil || len(inst) != 2 {
		t.Fatalf("Nodes: %v %v", inst, err)
	}
	if inst[0].Id != "digitalocean://"+p.Nodes[0].DropletID || inst[0].Status.State != cloudprovider.InstanceRunning {
		t.Errorf("instance 0: %+v", inst[0])
	}
	if inst[1].Status.ErrorInfo == nil || inst[1].Status.ErrorInfo.ErrorMessage != "quota exceeded" {
		t.Errorf("instance 1: %+v", inst[1].Status)
	}
}

func TestNodeGroupBasics(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 2, 1, 7))
	e.refresh()
	g := e.group(p.ID)
	if g.Debug() != fmt.Sprintf("cluster ID: %s (min:1 max:7)", p.ID) {
		t.Errorf("Debug() = %q", g.Debug())
	}
	if g.MinSize() != 1 || g.MaxSize() != 7 || !g.Exist() || g.Autoprovisioned() {
		t.Error("min/max/exist/autoprovisioned wrong")
	}
	if _, err := g.Create(); err != cloudprovider.ErrAlreadyExist {
		t.Errorf("Create of an existing pool: %v", err)
	}
	// A pool this autoscaler did not create is never deleted.
	if err := g.Delete(); err == nil || !strings.Contains(err.Error(), "never deleted") {
		t.Errorf("Delete of a hand-made pool: %v", err)
	}
	if g.ForceDeleteNodes(nil) != cloudprovider.ErrNotImplemented {
		t.Error("ForceDeleteNodes")
	}
	defaults := config.Defaults().NodeGroupDefaults
	if o, err := g.GetOptions(defaults); err != nil || *o != defaults {
		t.Errorf("GetOptions with no cluster settings = %+v, %v; want the defaults", o, err)
	}
	if e.p.Name() != "digitalocean" {
		t.Error("Name")
	}
}

func TestNodeGroupForNodeAndHasInstance(t *testing.T) {
	e := newEnv(t, doks.Options{})
	as := e.pool(autoscaled("a", 1, 0, 3))
	fixed := e.pool(doks.PoolSpec{Name: "fixed", Size: "s-1vcpu-2gb", Count: 1})
	probe := &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "digitalocean://1"}}
	probe.Name = "n"
	if _, err := e.p.HasInstance(probe); err == nil {
		t.Error("HasInstance before Refresh should fail")
	}
	e.refresh()

	cases := []struct {
		name   string
		node   *apiv1.Node
		group  string
		has    bool
		hasErr bool
	}{
		{"autoscaled", kubeNode(as.Nodes[0]), as.ID, true, false},
		{"fixed pool", kubeNode(fixed.Nodes[0]), "", true, false},
		{"unknown droplet", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "digitalocean://999"}}, "", false, false},
		{"other cloud", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-1"}}, "", false, true},
		{"no provider ID", &apiv1.Node{}, "", false, true},
	}
	for _, c := range cases {
		c.node.Name = c.name
		g, err := e.p.NodeGroupForNode(c.node)
		if err != nil {
			t.Errorf("%s: NodeGroupForNode error %v", c.name, err)
		}
		if c.group == "" && g != nil {
			t.Errorf("%s: group %v, want nil", c.name, g)
		}
		if c.group != "" && (g == nil || g.Id() != c.group) {
			t.Errorf("%s: group %v, want %s", c.name, g, c.group)
		}
		has, err := e.p.HasInstance(c.node)
		if (err != nil) != c.hasErr || has != c.has {
			t.Errorf("%s: HasInstance %v %v", c.name, has, err)
		}
	}
	// A node without a provider ID yet is still found by its node-id label.
	n := kubeNode(as.Nodes[0])
	n.Spec.ProviderID = ""
	if g, _ := e.p.NodeGroupForNode(n); g == nil || g.Id() != as.ID {
		t.Errorf("lookup by node-id label: %v", g)
	}
}

func TestRetryOn429HonoursRetryAfter(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(autoscaled("a", 1, 0, 3))
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: 429, RetryAfter: time.Second, Times: 1})
	e.refresh()
	if got := e.sim.RequestCount(doks.OpListNodePools); got != 2 {
		t.Errorf("%d list requests, want 2", got)
	}
	sleeps := e.recordedSleeps()
	if len(sleeps) != 1 || sleeps[0] != time.Second {
		t.Errorf("waits %v, want exactly [1s] from Retry-After", sleeps)
	}
	if got := e.obs.statuses(opListNodePools); fmt.Sprint(got) != "[429 200]" {
		t.Errorf("observed statuses %v, want [429 200]", got)
	}
}

func TestRetryOn5xxAndBounds(t *testing.T) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 1, 0, 3))
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: 500, Times: 2})
	e.refresh()
	if got := e.obs.statuses(opListNodePools); fmt.Sprint(got) != "[500 500 200]" {
		t.Errorf("observed %v, want [500 500 200]", got)
	}
	for i, d := range e.recordedSleeps() {
		if d <= 0 || d > 40*time.Millisecond {
			t.Errorf("backoff %d is %s, want within (0, 40ms]", i, d)
		}
	}

	// 501 and 404 are not retried.
	for _, status := range []int{501, 404} {
		e.sim.ClearFaults()
		e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: status})
		before := e.sim.RequestCount(doks.OpListNodePools)
		if err := e.p.Refresh(); err == nil {
			t.Errorf("%d: Refresh succeeded", status)
		}
		if got := e.sim.RequestCount(doks.OpListNodePools) - before; got != 1 {
			t.Errorf("%d: %d requests, want 1", status, got)
		}
	}
	if len(e.p.NodeGroups()) != 1 {
		t.Error("a failed Refresh must keep the previous node groups")
	}

	// A server that keeps failing is given up on after maxAttempts.
	e.sim.ClearFaults()
	e.sim.InjectFault(doks.Fault{Operation: doks.OpUpdateNodePool, Status: 503})
	before := e.sim.RequestCount(doks.OpUpdateNodePool)
	err := e.group(p.ID).IncreaseSize(1)
	if err == nil || !strings.Contains(err.Error(), "giving up after 5 attempts") {
		t.Errorf("error %v", err)
	}
	if got := e.sim.RequestCount(doks.OpUpdateNodePool) - before; got != 5 {
		t.Errorf("%d attempts, want 5", got)
	}
}

func TestRetryAfterCappedAtMaxWait(t *testing.T) {
	e := newEnv(t, doks.Options{}, func(_ *testEnv, o *clientOptions, _ *config.AutoscalingOptions) {
		o.maxWait = 50 * time.Millisecond
	})
	e.pool(autoscaled("a", 1, 0, 3))
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListNodePools, Status: 503, RetryAfter: time.Hour, Times: 1})
	e.refresh()
	if s := e.recordedSleeps(); len(s) != 1 || s[0] != 50*time.Millisecond {
		t.Errorf("waits %v, want [50ms] (maxWait)", s)
	}
}

func TestSlowsDownWhenRateLimitLow(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(autoscaled("a", 1, 0, 3))
	e.sim.SetRateLimit(15) // pacing starts at 10 remaining
	for i := 0; i < 3; i++ {
		e.refresh() // 3 requests first (pools, template, cluster settings), then 1 each
	}
	if s := e.recordedSleeps(); len(s) != 0 {
		t.Fatalf("paced with plenty left: %v", s)
	}
	e.refresh()
	if s := e.recordedSleeps(); len(s) != 1 || s[0] != 5*time.Millisecond {
		t.Errorf("waits %v, want one pacing delay capped at paceMax 5ms", s)
	}
	if e.obs.lastLimit != 15 || e.obs.lastRem != 9 {
		t.Errorf("observer saw limit %d remaining %d", e.obs.lastLimit, e.obs.lastRem)
	}
}

func TestPaceDelayRule(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	reset := now.Add(100 * time.Second)
	cases := []struct {
		name string
		r    rateState
		want time.Duration
	}{
		{"unknown", rateState{}, 0},
		{"plenty", rateState{true, 5000, 4000, reset}, 0},
		{"just above threshold", rateState{true, 5000, 251, reset}, 0},
		{"at threshold", rateState{true, 5000, 250, reset}, 100 * time.Second / 251},
		{"spread capped", rateState{true, 5000, 1, reset}, 10 * time.Second},
		{"spent", rateState{true, 5000, 0, reset}, 60 * time.Second},
		{"spent, reset soon", rateState{true, 5000, 0, now.Add(3 * time.Second)}, 3 * time.Second},
		{"reset passed", rateState{true, 5000, 0, now.Add(-time.Second)}, 0},
		{"small limit floor of 10", rateState{true, 100, 10, reset}, 100 * time.Second / 11},
	}
	for _, c := range cases {
		if got := paceDelay(c.r, now, 10*time.Second, 60*time.Second); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestTokenFileRotation(t *testing.T) {
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sim := doks.NewServer(doks.Options{ClusterID: testCluster, Token: "new-token"})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if _, err := sim.CreatePool(autoscaled("a", 1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "cloud.json")
	cfgJSON := fmt.Sprintf(`{"cluster_id": %q, "token_file": %q, "url": %q}`, testCluster, tokenPath, sim.URL())
	if err := os.WriteFile(cfgPath, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.CloudConfig = cfgPath
	p, err := BuildDigitalOcean(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sim.TotalRequests() != 0 {
		t.Errorf("BuildDigitalOcean made %d requests", sim.TotalRequests())
	}
	err = p.Refresh()
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("old token: %v, want 401", err)
	}
	if strings.Contains(err.Error(), "old-token") {
		t.Errorf("error leaks the token: %v", err)
	}
	if sim.TotalRequests() != 1 {
		t.Errorf("401 retried: %d requests", sim.TotalRequests())
	}
	// Rotate as the kubelet does: write a new file and rename it over.
	tmp := filepath.Join(dir, "token.tmp")
	if err := os.WriteFile(tmp, []byte("  new-token \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, tokenPath); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if len(p.NodeGroups()) != 1 {
		t.Error("no node group after rotation")
	}
	// An emptied file keeps the last good token.
	if err := os.WriteFile(tokenPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(); err != nil {
		t.Errorf("emptied token file broke requests: %v", err)
	}
}

func TestUserAgentAndObserver(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(autoscaled("a", 1, 0, 3))
	e.refresh()
	want := "cluster-autoscaler-digitalocean/" + version.Version + " godo/"
	e.mu.Lock()
	uas := append([]string(nil), e.userAgents...)
	e.mu.Unlock()
	if len(uas) != 3 { // pools, template, cluster settings
		t.Fatalf("%d requests seen", len(uas))
	}
	for _, ua := range uas {
		if !strings.HasPrefix(ua, want) {
			t.Errorf("User-Agent %q, want prefix %q", ua, want)
		}
	}
	if got := e.obs.statuses(opGetNodePoolTemplate); fmt.Sprint(got) != "[200]" {
		t.Errorf("template calls observed: %v", got)
	}
	if e.obs.rateCalls != 3 || e.obs.lastLimit != doks.DefaultRateLimit {
		t.Errorf("rate limit observed %d times, limit %d", e.obs.rateCalls, e.obs.lastLimit)
	}
}

func TestTemplateNodeInfoFromSimulator(t *testing.T) {
	e := newEnv(t, doks.Options{Region: "ams3"}, withGPULabel(LabelGPUNodeUpstream))
	cpuPool := e.pool(doks.PoolSpec{Name: "small", Size: "s-1vcpu-2gb", Count: 0, AutoScale: true, MaxNodes: 3,
		Labels: map[string]string{"team": "a"}})
	gpuPool := e.pool(doks.PoolSpec{Name: "h100", Size: "gpu-h100x1-80gb", Count: 0, AutoScale: true, MaxNodes: 2,
		Taints: []godo.Taint{{Key: "nvidia.com/gpu", Effect: "NoSchedule"}}})
	e.refresh()

	ni, err := e.group(cpuPool.ID).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	n := ni.Node()
	if !strings.HasPrefix(n.Name, "small-template-") || n.Spec.ProviderID != "" {
		t.Errorf("name %q providerID %q", n.Name, n.Spec.ProviderID)
	}
	if n.Status.Allocatable.Cpu().MilliValue() != 390 || n.Status.Capacity.Cpu().MilliValue() != 1000 {
		t.Errorf("cpu allocatable %s capacity %s: want 390m from cpu_milli_cores", n.Status.Allocatable.Cpu(), n.Status.Capacity.Cpu())
	}
	for k, v := range map[string]string{
		"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": n.Name,
		"node.kubernetes.io/instance-type": "s-1vcpu-2gb", LabelNodePool: "small", LabelNodePoolID: cpuPool.ID, "team": "a",
		// From the cluster object, as DOKS labels its nodes.
		"topology.kubernetes.io/region": "ams3", "failure-domain.beta.kubernetes.io/region": "ams3",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Labels[LabelGPUBrand] != "" {
		t.Error("GPU label on a CPU pool")
	}

	ni, err = e.group(gpuPool.ID).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	n = ni.Node()
	gpus := n.Status.Allocatable[gpu.ResourceNvidiaGPU]
	if gpus.Value() != 1 || n.Labels[LabelGPUBrand] != "nvidia" || n.Labels[LabelGPUModel] != "nvidia_h100" || n.Labels[LabelGPUNodeUpstream] != "nvidia" {
		t.Errorf("GPU template: gpus %s labels %v", gpus.String(), n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "nvidia.com/gpu" || n.Spec.Taints[0].Value != "" {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	if cfg := e.p.GetNodeGpuConfig(n); cfg == nil || cfg.ExtendedResourceName != gpu.ResourceNvidiaGPU || cfg.Label != LabelGPUNodeUpstream {
		t.Errorf("GPU config %+v", cfg)
	}
	if _, ok := e.p.GetAvailableGPUTypes()["nvidia_h100"]; !ok {
		t.Errorf("GPU types %v lack nvidia_h100", e.p.GetAvailableGPUTypes())
	}
	if e.p.GPULabel() != LabelGPUNodeUpstream {
		t.Errorf("GPULabel %q", e.p.GPULabel())
	}
}

// pricingEnv returns one autoscaled pool of s-2vcpu-4gb, its pricing model, and
// its pool.
func pricingEnv(t *testing.T) (*testEnv, cloudprovider.PricingModel, godo.KubernetesNodePool) {
	e := newEnv(t, doks.Options{})
	p := e.pool(autoscaled("a", 1, 0, 3))
	e.refresh()
	model, err := e.p.Pricing()
	if err != nil {
		t.Fatal(err)
	}
	return e, model, p
}

func TestPricing(t *testing.T) {
	e, model, p := pricingEnv(t)
	if e.sim.RequestCount(doks.OpListSizes) != 0 {
		t.Error("sizes fetched before any price was asked")
	}
	start := time.Now()
	end := start.Add(2 * time.Hour)
	ni, _ := e.group(p.ID).TemplateNodeInfo()
	price, err := model.NodePrice(ni.Node(), start, end)
	if err != nil {
		t.Fatal(err)
	}
	const hourly = 0.03571 // s-2vcpu-4gb: 24 / 672
	if diff := price - 2*hourly; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("NodePrice %v, want %v", price, 2*hourly)
	}
	// A registered node without the instance-type label: by its pool.
	running := kubeNode(p.Nodes[0])
	if got, err := model.NodePrice(running, start, end); err != nil || got != price {
		t.Errorf("NodePrice by pool %v %v", got, err)
	}
	if _, err := model.NodePrice(&apiv1.Node{}, start, end); err == nil {
		t.Error("price for a node of unknown size")
	}
	unknown := &apiv1.Node{}
	unknown.Labels = map[string]string{apiv1.LabelInstanceTypeStable: "no-such-size"}
	if _, err := model.NodePrice(unknown, start, end); err == nil {
		t.Error("price for an unknown slug")
	}

	// A pod asking 1 of 2 vCPUs and 1 of 4 GiB costs half the reference node.
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Resources: req("1", "1Gi")}}}}
	pp, err := model.PodPrice(pod, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if diff := pp - hourly; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("PodPrice %v, want %v", pp, hourly)
	}
	if n := e.sim.RequestCount(doks.OpListSizes); n != 1 {
		t.Errorf("sizes fetched %d times, want 1 (cached)", n)
	}
	e.advance(25 * time.Hour)
	if _, err := model.PodPrice(pod, start, end); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.RequestCount(doks.OpListSizes); n != 2 {
		t.Errorf("sizes fetched %d times after a day, want 2", n)
	}
}

// While the Sizes API fails and no list was ever fetched, prices are errors,
// and the API is asked again once a minute, not on every call.
// A pod is priced by what the scheduler reserves for it: an init container
// starts after the sidecars declared before it, so while it runs the pod
// holds both. Here that peak (1.5 + 0.5 vCPU) is the whole 2-vCPU reference
// node, where the app and sidecar alone would be 0.6 vCPU.
func TestPodPriceCountsInitContainerBesideSidecar(t *testing.T) {
	_, model, _ := pricingEnv(t)
	always := apiv1.ContainerRestartPolicyAlways
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{
		InitContainers: []apiv1.Container{
			{Name: "proxy", Resources: req("500m", "256Mi"), RestartPolicy: &always},
			{Name: "migrate", Resources: req("1500m", "256Mi")},
		},
		Containers: []apiv1.Container{{Name: "app", Resources: req("100m", "256Mi")}},
	}}
	start := time.Now()
	got, err := model.PodPrice(pod, start, start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const hourly = 0.03571 // s-2vcpu-4gb: 24 / 672
	if diff := got - hourly; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("PodPrice %v, want %v (2 of 2 vCPUs for an hour)", got, hourly)
	}
}

func TestPricingFirstFetchFailure(t *testing.T) {
	e, model, p := pricingEnv(t)
	ni, _ := e.group(p.ID).TemplateNodeInfo()
	start := time.Now()
	e.sim.InjectFault(doks.Fault{Operation: doks.OpListSizes, Status: http.StatusNotFound})
	for i := 0; i < 3; i++ {
		if _, err := model.NodePrice(ni.Node(), start, start.Add(time.Hour)); err == nil {
			t.Fatal("a price while the Sizes API fails")
		}
	}
	if n := e.sim.RequestCount(doks.OpListSizes); n != 1 {
		t.Errorf("Sizes API asked %d times within a minute, want 1", n)
	}
	e.sim.ClearFaults()
	e.advance(pricesRetryInterval)
	if _, err := model.NodePrice(ni.Node(), start, start.Add(time.Hour)); err != nil {
		t.Fatalf("no price a minute after the API came back: %v", err)
	}
	if n := e.sim.RequestCount(doks.OpListSizes); n != 2 {
		t.Errorf("Sizes API asked %d times, want 2", n)
	}
}

// A redirect to another host is not followed: the token would go with it.
func TestRedirectToAnotherHostRefused(t *testing.T) {
	e := newEnv(t, doks.Options{})
	e.pool(autoscaled("a", 1, 0, 3))
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
	}))
	defer elsewhere.Close()
	e.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
		return true
	})
	err := e.p.Refresh()
	if err == nil || !strings.Contains(err.Error(), "refusing a redirect") {
		t.Fatalf("Refresh error = %v, want the redirect refused", err)
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the other host got %d request(s)", n)
	}
}

// Consolidation applies to the pools this autoscaler created and to the
// pools an operator tagged for it; any other pool's nodes stay.
func TestConsolidateOptionFromPoolTags(t *testing.T) {
	e := newEnv(t, doks.Options{})
	plain := e.pool(autoscaled("plain", 1, 0, 3))
	tagged := autoscaled("tagged", 1, 0, 3)
	tagged.Tags = []string{TagConsolidate}
	tp := e.pool(tagged)
	created := autoscaled("created", 1, 0, 3)
	created.Tags = []string{TagAutoprovisioned}
	cp := e.pool(created)
	e.refresh()
	defaults := config.Defaults().NodeGroupDefaults
	for _, tc := range []struct {
		id   string
		want bool
	}{{plain.ID, false}, {tp.ID, true}, {cp.ID, true}} {
		o, err := e.group(tc.id).GetOptions(defaults)
		if err != nil {
			t.Fatal(err)
		}
		if o.Consolidate != tc.want {
			t.Errorf("pool %s: Consolidate %v, want %v", tc.id, o.Consolidate, tc.want)
		}
	}
}
