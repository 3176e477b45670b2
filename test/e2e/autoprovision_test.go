package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// Node autoprovisioning scenarios (issue 20). Every pool the autoscaler creates
// carries this tag; the scenarios tell created pools from the others by it.
const (
	tagAutoprovisioned = "k8s-cluster-autoscaler-autoprovisioned"
	napFlag            = "--node-autoprovisioning-enabled"
	// 12 GiB fits no s-2vcpu-4gb node; of the 16 GB sizes m-2vcpu-16gb is the cheapest.
	bigMemory   = "12Gi"
	cheapest16G = "m-2vcpu-16gb"
)

// napConfig writes a cloud config for the sandbox with an autoprovisioning
// section allowing sizes; mode is the node_pool_selection ("" for the
// default) and returns its path.
func (s *scenario) napConfig(mode string, sizes ...string) string {
	s.t.Helper()
	return s.napConfigSection(mode, map[string]any{"sizes": sizes, "max_nodes_per_pool": 3})
}

// napConfigSection is napConfig with the whole autoprovisioning section.
func (s *scenario) napConfigSection(mode string, section map[string]any) string {
	s.t.Helper()
	cfg := map[string]any{
		"cluster_id": s.sb.ClusterID, "token_file": s.sb.TokenPath, "url": s.sb.DOKS.URL(),
		"autoprovisioning": section,
	}
	if mode != "" {
		cfg["node_pool_selection"] = mode
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(artifacts, s.ns, "cloud-nap.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// withMemory makes the Deployment's pods ask for mem of memory.
func withMemory(mem string) deployOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse(mem)
	}
}

// withGPU makes the Deployment's pods ask for n devices of a device plugin's resource.
func withGPU(name apiv1.ResourceName, n int64) deployOption {
	return func(d *appsv1.Deployment) {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		r := &d.Spec.Template.Spec.Containers[0].Resources
		r.Requests[name] = q
		r.Limits = apiv1.ResourceList{name: q}
	}
}

// tolerating makes the Deployment's pods tolerate the taint key=value:NoSchedule
// (operator Exists when value is empty), as GPU pods on DOKS tolerate their
// vendor's GPU taint.
func tolerating(key, value string) deployOption {
	return func(d *appsv1.Deployment) {
		t := apiv1.Toleration{Key: key, Operator: apiv1.TolerationOpEqual, Value: value, Effect: apiv1.TaintEffectNoSchedule}
		if value == "" {
			t.Operator = apiv1.TolerationOpExists
		}
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, t)
	}
}

// createdPools are the pools listed now that carry the autoprovisioned tag.
func (s *scenario) createdPools() []godo.KubernetesNodePool {
	var out []godo.KubernetesNodePool
	for _, p := range s.sb.DOKS.Pools() {
		if slices.Contains(p.Tags, tagAutoprovisioned) {
			out = append(out, p)
		}
	}
	return out
}

// waitCreatedPool waits for the one created pool and returns it.
func (s *scenario) waitCreatedPool(timeout time.Duration) godo.KubernetesNodePool {
	s.t.Helper()
	var p godo.KubernetesNodePool
	s.eventually("a created node pool", timeout, func() error {
		created := s.createdPools()
		if len(created) != 1 {
			return fmt.Errorf("%d created pools", len(created))
		}
		p = created[0]
		return nil
	})
	return p
}

// nothingCreated checks that no pool creation was asked for and only the given pools exist.
func (s *scenario) nothingCreated(pools int) func() error {
	return func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 0 {
			return fmt.Errorf("%d pool creations asked for", n)
		}
		if n := len(s.sb.DOKS.Pools()); n != pools {
			return fmt.Errorf("%d pools, want %d", n, pools)
		}
		return nil
	}
}

// (a) A pod asking for 12 GiB in a cluster whose only pool is s-2vcpu-4gb: one pool of
// the cheapest allowed size that fits is created, with the one node the pod needs and
// no second pool while DOKS provisions it; the pod runs there. Once the Deployment is
// deleted the pool's node is unneeded, scale-down removes it as usual, and since it is
// the pool's last node the pool is deleted with DeleteNodePool in its place: no DELETE
// of the node, no count of 0.
func TestAutoprovisionCheapestFittingPoolCreatedThenDeleted(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2)}, bootDelay: 3 * time.Second})
	ca := s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", "m-*", "g-*"))
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))

	p := s.waitCreatedPool(60 * time.Second)
	if p.Size != cheapest16G || p.AutoScale || p.Count != 1 {
		t.Errorf("created pool %s: size %s, auto_scale %v, count %d; want %s, auto_scale off, 1 node",
			p.Name, p.Size, p.AutoScale, p.Count, cheapest16G)
	}
	for _, tag := range []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:0", "k8s-cluster-autoscaler-max:3"} {
		if !slices.Contains(p.Tags, tag) {
			t.Errorf("created pool %s lacks the tag %s: %v", p.Name, tag, p.Tags)
		}
	}
	s.waitRunning("mem", 1, 60*time.Second)
	if pod := s.pods("mem")[0]; !strings.HasPrefix(pod.Spec.NodeName, p.Name) {
		t.Errorf("the pod runs on %s, not on a node of the created pool %s", pod.Spec.NodeName, p.Name)
	}
	if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 1 {
		t.Errorf("%d pool creations asked for while DOKS provisioned the first, want 1", n)
	}
	s.eventually("the status ConfigMap marks the created pool", 30*time.Second, func() error {
		cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := cm.Data["status"]
		if strings.Count(st, "autoprovisioned: true") != 1 || !strings.Contains(st, "name: "+p.ID) {
			return fmt.Errorf("want the created pool %s, and it alone, marked autoprovisioned:\n%s", p.ID, st)
		}
		return nil
	})
	if m := s.maxTarget(p.Name); m != 1 {
		t.Errorf("created pool reached %d nodes, want 1", m)
	}
	if n := s.metric(ca, "cluster_autoscaler_created_node_groups_total", nil); n != 1 {
		t.Errorf("created_node_groups_total = %v, want 1", n)
	}
	if ev := s.events("TriggeredScaleUp"); len(ev) == 0 || !strings.Contains(ev[0].Message, p.ID) {
		t.Errorf("TriggeredScaleUp events %v should name the created pool %s", ev, p.ID)
	}

	if err := s.kube.AppsV1().Deployments(s.ns).Delete(s.ctx, "mem", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("the created pool deleted", 90*time.Second, func() error {
		if c := s.createdPools(); len(c) != 0 {
			return fmt.Errorf("pool %s still listed with %d nodes", c[0].Name, c[0].Count)
		}
		return nil
	})
	if n := s.sb.DOKS.RequestCount(doks.OpDeleteNodePool); n != 1 {
		t.Errorf("%d DeleteNodePool requests, want 1", n)
	}
	var changed []doks.Change
	for _, c := range s.sb.DOKS.Changes() {
		if c.Pool == p.ID {
			changed = append(changed, c)
		}
	}
	if want := []doks.Change{{Op: doks.OpDeleteNodePool, Pool: p.ID}}; !slices.Equal(changed, want) {
		t.Errorf("requests changing the created pool: %+v, want its DeleteNodePool alone (no node delete, no count change first)", changed)
	}
	if n := s.metric(ca, "cluster_autoscaler_scaled_down_nodes_total", map[string]string{"reason": "empty"}); n != 1 {
		t.Errorf("scaled_down_nodes_total{reason=empty} = %v, want 1: the pool's node goes through scale-down", n)
	}
	if _, ok := s.sb.Pool("small"); !ok {
		t.Error("the hand-made pool small is gone")
	}
	if n := s.metric(ca, "cluster_autoscaler_deleted_node_groups_total", nil); n != 1 {
		t.Errorf("deleted_node_groups_total = %v, want 1", n)
	}
	if ev := s.events("DeletedNodeGroup"); len(ev) != 1 {
		t.Errorf("%d DeletedNodeGroup events, want 1", len(ev))
	}
}

// (b) A pod asking for a GPU where no pool has one: a pool of the allowed GPU size is
// created (the cheapest H100 size, not the eight-GPU one) and the pod, which tolerates
// the GPU taint DOKS puts on GPU pools, runs there.
func TestAutoprovisionGPUPoolForAGPUPod(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("cpu", 1, 1, 2)}, bootDelay: time.Second})
	s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", "gpu-h100x*"))
	s.deploy("train", 1, smallPod, withGPU("nvidia.com/gpu", 1), tolerating("nvidia.com/gpu", ""))

	p := s.waitCreatedPool(60 * time.Second)
	if p.Size != h100x1 {
		t.Errorf("created pool %s has size %s, want %s", p.Name, p.Size, h100x1)
	}
	s.waitRunning("train", 1, 60*time.Second)
	if pod := s.pods("train")[0]; !strings.HasPrefix(pod.Spec.NodeName, p.Name) {
		t.Errorf("the GPU pod runs on %s, not on a node of the created pool %s", pod.Spec.NodeName, p.Name)
	}
	if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 1 {
		t.Errorf("%d pool creations, want 1", n)
	}
}

// (c) With --node-autoprovisioning-enabled off (the default) a pod no pool fits stays
// pending as before: NotTriggerScaleUp in the scheduler's words, and no pool is created
// although the cloud config allows sizes that would fit.
func TestAutoprovisionOffCreatesNothing(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2)}, bootDelay: time.Second})
	s.startAutoscaler("--cloud-config=" + s.napConfig("", "s-*", "m-*"))
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))
	ev := s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	if !strings.Contains(ev.Message, "Insufficient memory") {
		t.Errorf("NotTriggerScaleUp %q does not say the memory is insufficient", ev.Message)
	}
	s.holds("no pool created", 5*time.Second, s.nothingCreated(1))
}

// (c) With autoprovisioning on but no allowed size big enough: nothing is created and
// NotTriggerScaleUp says that no allowed size fits.
func TestAutoprovisionNoAllowedSizeFits(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2)}, bootDelay: time.Second})
	s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-1vcpu-*", "s-2vcpu-*", "c-2"))
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))
	ev := s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	if !strings.Contains(ev.Message, "no node pool size allowed for autoprovisioning fits") {
		t.Errorf("NotTriggerScaleUp %q does not say that no allowed size fits", ev.Message)
	}
	s.holds("no pool created", 5*time.Second, s.nothingCreated(1))
}

// (d) At the account's droplet limit DigitalOcean refuses the creation with a 422: one
// refused request per backoff, an event in DigitalOcean's words, no loop over the other
// sizes; once the limit is raised, the loop after the backoff creates the pool.
func TestAutoprovisionDropletLimitNoCreationLoop(t *testing.T) {
	s := newScenario(t, scenarioOptions{dropletLimit: 1, pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2)}, bootDelay: time.Second})
	withoutDropletRead(t, s) // the 422 fallback; with droplet:read no creation is sent at the limit
	const backoff = 8 * time.Second
	ca := s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", "m-*", "g-*"),
		"--initial-node-group-backoff-duration="+backoff.String(), "--max-node-group-backoff-duration=1m")
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))
	ev := s.waitEvent("FailedToCreateNodeGroup", 60*time.Second)
	if !strings.Contains(ev.Message, doks.DropletLimitMessage) {
		t.Errorf("FailedToCreateNodeGroup %q does not give DigitalOcean's words %q", ev.Message, doks.DropletLimitMessage)
	}
	s.holds("one refused creation", backoff/2, func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 1 {
			return fmt.Errorf("%d pool creations asked for, want the one refused", n)
		}
		return nil
	})
	if n := s.metric(ca, "cluster_autoscaler_failed_scale_ups_total", map[string]string{"reason": "dropletLimitExceeded"}); n != 1 {
		t.Errorf("failed_scale_ups_total{reason=dropletLimitExceeded} = %v, want 1", n)
	}

	s.sb.DOKS.SetDropletLimit(doks.DefaultDropletLimit)
	p := s.waitCreatedPool(60 * time.Second)
	if p.Size != cheapest16G {
		t.Errorf("created pool has size %s, want %s", p.Size, cheapest16G)
	}
	s.waitRunning("mem", 1, 60*time.Second)
	if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 2 {
		t.Errorf("%d pool creations asked for, want the refused one and the one accepted", n)
	}
}

// (e) A pool made by hand, tagged only with the min/max tags (tags mode), is an ordinary
// node group: its idle node is removed down to its min of 0, and the empty pool is left
// alone, never deleted, with autoprovisioning on.
func TestAutoprovisionNeverDeletesAHandMadePool(t *testing.T) {
	tags := []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:0", "k8s-cluster-autoscaler-max:3"}
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{{Name: "manual", Size: size, Count: 1, Tags: tags}}, bootDelay: time.Second})
	s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("tags", "s-*"))
	s.waitTarget("manual", 0, 60*time.Second)
	s.waitNodes("manual", 0, 60*time.Second)
	s.holds("the empty hand-made pool kept", 8*time.Second, func() error {
		if _, ok := s.sb.Pool("manual"); !ok {
			return fmt.Errorf("pool manual was deleted")
		}
		if n := s.sb.DOKS.RequestCount(doks.OpDeleteNodePool); n != 0 {
			return fmt.Errorf("%d DeleteNodePool requests", n)
		}
		return nil
	})
}

// A pod claiming an AMD GPU through DRA, on a cluster running both vendors' DRA drivers,
// tolerating both GPU taints, selecting dedicated=ml and tolerating dedicated=ml:NoSchedule
// (the operator allows the key): the pool created is of the AMD size, though NVIDIA sizes are
// allowed and one is cheaper, since only its predicted devices satisfy the claim; it carries the label, the
// separation taint and DOKS's amd.com/gpu taint, and so does its node, where the pod runs.
func TestAutoprovisionDRAClaimGetsItsVendorsGPUSizeAndSeparation(t *testing.T) {
	s := newScenario(t, scenarioOptions{region: "tor1", pools: []doks.PoolSpec{autoscaled("cpu", 1, 1, 2)}, bootDelay: time.Second,
		agent: nodeagent.Options{DRADrivers: []string{gpudriver.NVIDIA, gpudriver.AMD}}})
	s.claimTemplate("one-amd-gpu", gpudriver.AMD, 1)
	s.startAutoscaler(napFlag, "--cloud-config="+s.napConfigSection("", map[string]any{
		"sizes": []string{"s-*", "gpu-*"}, "max_nodes_per_pool": 2, "taint_keys": []string{"dedicated"}}))
	// Tolerating both vendors' GPU taints: the claim alone must tell the sizes apart.
	s.deploy("infer", 1, smallPod, withClaim("one-amd-gpu"), tolerating("amd.com/gpu", ""), tolerating("nvidia.com/gpu", ""),
		withNodeSelector("dedicated", "ml"), tolerating("dedicated", "ml"))

	p := s.waitCreatedPool(60 * time.Second)
	var taints []string
	for _, t := range p.Taints {
		taints = append(taints, t.String())
	}
	slices.Sort(taints)
	want := []string{"amd.com/gpu:NoSchedule", "dedicated=ml:NoSchedule"}
	if p.Size != "gpu-mi300x1-192gb" || p.Labels["dedicated"] != "ml" || !slices.Equal(taints, want) {
		t.Errorf("created pool %s: size %s, labels %v, taints %v; want gpu-mi300x1-192gb, dedicated=ml, %v",
			p.Name, p.Size, p.Labels, taints, want)
	}
	s.waitRunning("infer", 1, 60*time.Second)
	nodes := s.poolNodes(p.Name)
	if len(nodes) != 1 || s.pods("infer")[0].Spec.NodeName != nodes[0].Name {
		t.Fatalf("the claim pod runs on %s, not on the created pool's node %v", s.pods("infer")[0].Spec.NodeName, nodes)
	}
	var nodeTaints []string
	for _, t := range nodes[0].Spec.Taints {
		nodeTaints = append(nodeTaints, t.ToString())
	}
	slices.Sort(nodeTaints)
	if !slices.Equal(nodeTaints, want) {
		t.Errorf("the created pool's node has taints %v, want %v", nodeTaints, want)
	}
	if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 1 {
		t.Errorf("%d pool creations, want 1", n)
	}
}

// Issue 31 (a): with --expander=price and a dearer pool that could hold the pods too,
// the first pool creation is applied but answered 504, and the listings show the new
// pool only 8 s later. The creation is not sent again nor reported failed, the dearer
// pool is not grown for the same pods: exactly one pool is created, with the two nodes
// the two pods need, and they run there.
func TestAutoprovisionLostCreateAnswerMakesOnePool(t *testing.T) {
	dearer := doks.PoolSpec{Name: "dearer", Size: "s-8vcpu-16gb", Count: 0, AutoScale: true, MinNodes: 0, MaxNodes: 3}
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2), dearer}, bootDelay: 2 * time.Second})
	s.sb.DOKS.SetListLag(8 * time.Second)
	s.sb.DOKS.InjectFault(doks.Fault{Operation: doks.OpCreateNodePool, Status: 504, Applied: true, Times: 1})
	s.deploy("mem", 2, smallPod, withMemory(bigMemory))
	s.startAutoscaler(napFlag, "--expander=price", "--cloud-config="+s.napConfig("", "s-*", "m-*"))

	p := s.waitCreatedPool(60 * time.Second)
	if p.Size != cheapest16G || p.Count != 2 {
		t.Errorf("created pool %s: size %s, count %d; want %s with 2 nodes", p.Name, p.Size, p.Count, cheapest16G)
	}
	s.waitRunning("mem", 2, 90*time.Second)
	for _, pod := range s.pods("mem") {
		if !strings.HasPrefix(pod.Spec.NodeName, p.Name) {
			t.Errorf("pod %s runs on %s, not on a node of the created pool %s", pod.Name, pod.Spec.NodeName, p.Name)
		}
	}
	s.holds("one pool creation, the dearer pool left alone", 5*time.Second, func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpCreateNodePool); n != 1 {
			return fmt.Errorf("%d pool creations asked for, want 1", n)
		}
		if n := len(s.createdPools()); n != 1 {
			return fmt.Errorf("%d created pools, want 1", n)
		}
		if m := s.maxTarget("dearer"); m != 0 {
			return fmt.Errorf("the dearer pool was grown to %d nodes for pods the created pool holds", m)
		}
		return nil
	})
	if m := s.maxTarget(p.Name); m != 2 {
		t.Errorf("created pool reached %d nodes, want 2", m)
	}
	if ev := s.events("FailedToCreateNodeGroup"); len(ev) != 0 {
		t.Errorf("a creation whose answer was lost was reported failed: %v", ev[0].Message)
	}
}

// Issue 31 (c): a token without tag:read (DigitalOcean lists pools without their
// tags) and autoprovisioning on, in the default auto_scale mode: a pool created now
// could never be recognised as the autoscaler's, so none is created, and the scope is
// named in the log, an event, the status ConfigMap and the pods' NotTriggerScaleUp.
func TestAutoprovisionWithoutTagReadCreatesNoPool(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("small", 1, 1, 2)}, bootDelay: time.Second})
	token, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s.sb.DOKS.SetTokenWithoutTagRead(strings.TrimSpace(string(token)))
	ca := s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", "m-*"))
	s.deploy("mem", 1, smallPod, withMemory(bigMemory))

	ev := s.waitEvent("CloudProviderProblem", 60*time.Second)
	if !strings.Contains(ev.Message, "node autoprovisioning") || !strings.Contains(ev.Message, "tag:read") {
		t.Errorf("CloudProviderProblem event %q does not say autoprovisioning needs tag:read", ev.Message)
	}
	nt := s.waitEvent("NotTriggerScaleUp", 60*time.Second)
	if !strings.Contains(nt.Message, "node pool creation stopped") {
		t.Errorf("NotTriggerScaleUp %q does not say node pool creation is stopped", nt.Message)
	}
	s.eventually("the status ConfigMap's message naming tag:read", 30*time.Second, func() error {
		cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := cm.Data["status"]; !strings.Contains(st, "node autoprovisioning") || !strings.Contains(st, "tag:read") {
			return fmt.Errorf("status:\n%s", st)
		}
		return nil
	})
	s.holds("no pool created", 8*time.Second, s.nothingCreated(1))
	// The problem is an error once; each loop's scale-up says at V(2) why
	// it creates nothing, which is a decision, not the problem again.
	if n := len(logLines(ca.LogPath, `"DigitalOcean provider problem" problem="node autoprovisioning: none of the cluster's`)); n != 1 {
		t.Errorf("the problem was logged as an error %d times, want once", n)
	}
}
