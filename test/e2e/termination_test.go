package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// terminationSeen is when, first, a watched node was cordoned, its DaemonSet
// pod started terminating, and DigitalOcean was asked to delete it.
type terminationSeen struct {
	mu                     sync.Mutex
	cordon, dsGone, delete time.Time
}

// watchTermination polls node, the DaemonSet pods of app on it and the DOKS
// simulator's view of its droplet until the test ends.
func (s *scenario) watchTermination(node, dsApp string) *terminationSeen {
	seen := &terminationSeen{}
	n, err := s.kube.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	droplet := strings.TrimPrefix(n.Spec.ProviderID, nodeagent.ProviderIDPrefix)
	mark := func(t *time.Time, happened bool) {
		if happened && t.IsZero() {
			*t = time.Now()
		}
	}
	go func() {
		wasRunning := false
		for s.ctx.Err() == nil {
			n, err := s.kube.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{})
			cordoned := err == nil && n.Spec.Unschedulable
			pods, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + dsApp, FieldSelector: "spec.nodeName=" + node})
			dsGone := err == nil && (len(pods.Items) == 0 || pods.Items[0].DeletionTimestamp != nil)
			running := false
			for _, p := range s.sb.DOKS.Pools() {
				for _, dn := range p.Nodes {
					if dn.DropletID == droplet && dn.Status != nil && dn.Status.State == "running" {
						running = true
					}
				}
			}
			// Deleting: running once, then draining, deleting or gone.
			deleting := wasRunning && !running
			wasRunning = wasRunning || running
			seen.mu.Lock()
			mark(&seen.cordon, cordoned)
			mark(&seen.dsGone, dsGone)
			mark(&seen.delete, deleting)
			seen.mu.Unlock()
			time.Sleep(25 * time.Millisecond)
		}
	}()
	return seen
}

// daemonSet runs one small pod of app on every node of pool.
func (s *scenario) daemonSet(app, pool string) {
	s.t.Helper()
	labels := map[string]string{"app": app}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: s.ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: apiv1.PodSpec{
					NodeSelector: map[string]string{nodeagent.LabelNodePool: pool},
					Containers: []apiv1.Container{{
						Name: "agent", Image: "registry.k8s.io/pause:3.10",
						Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
							apiv1.ResourceCPU: resource.MustParse("50m"), apiv1.ResourceMemory: resource.MustParse("32Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := s.kube.AppsV1().DaemonSets(s.ns).Create(s.ctx, ds, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("daemonset %s: %v", app, err)
	}
	s.waitRunning(app, 2, 60*time.Second)
}

// scaleDownOccupiedNodeWithDaemonSet builds two nodes, each with a DaemonSet
// pod: a holds a pod that can move, b a pod that may not. Only a can go; the
// autoscaler runs with extra flags, and the test returns what it saw of a's end.
func scaleDownOccupiedNodeWithDaemonSet(t *testing.T, extra ...string) *terminationSeen {
	const pool = "dsnodes"
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled(pool, 2, 1, 2)}})
	s.waitNodes(pool, 2, 60*time.Second)
	nodes := s.poolNodes(pool)
	a, b := nodes[0].Name, nodes[1].Name
	s.daemonSet("agent", pool)

	s.whileCordoned(b, func() {
		s.deploy("mover", 1, smallPod, withNodeSelector(nodeagent.LabelNodePool, pool))
		s.waitRunning("mover", 1, 60*time.Second)
	})
	s.pinnedPodOn(b, a, pool)

	seen := s.watchTermination(a, "agent")
	s.startAutoscaler(extra...)
	s.waitTarget(pool, 1, 90*time.Second)
	s.waitNodes(pool, 1, 60*time.Second)
	if left := s.poolNodes(pool); len(left) != 1 || left[0].Name != b {
		t.Fatalf("nodes left %v, want only %s", left, b)
	}
	time.Sleep(200 * time.Millisecond) // one more poll of the watcher
	seen.mu.Lock()
	defer seen.mu.Unlock()
	t.Logf("node %s: cordoned %s, DaemonSet pod terminating %s, DeleteNode %s", a,
		seen.cordon.Format(time.StampMilli), seen.dsGone.Format(time.StampMilli), seen.delete.Format(time.StampMilli))
	if seen.cordon.IsZero() || seen.delete.IsZero() || !seen.cordon.Before(seen.delete) {
		t.Errorf("node %s was not cordoned before DigitalOcean was asked to delete it", a)
	}
	return seen
}

// Upstream's defaults: the removed node is cordoned, its DaemonSet pod is
// evicted, and only then is the droplet deleted (with skip_drain, so DOKS
// would not do it).
func TestScaleDownCordonsThenEvictsDaemonSetPods(t *testing.T) {
	seen := scaleDownOccupiedNodeWithDaemonSet(t)
	if seen.dsGone.IsZero() || !seen.cordon.Before(seen.dsGone) || !seen.dsGone.Before(seen.delete) {
		t.Errorf("want cordon, then the DaemonSet pod's eviction, then DeleteNode")
	}
}

// With --daemonset-eviction-for-occupied-nodes=false the DaemonSet pod is left
// running until the droplet goes.
func TestScaleDownWithoutDaemonSetEviction(t *testing.T) {
	seen := scaleDownOccupiedNodeWithDaemonSet(t, "--daemonset-eviction-for-occupied-nodes=false")
	if !seen.dsGone.IsZero() && seen.dsGone.Before(seen.delete) {
		t.Errorf("the DaemonSet pod was evicted before DeleteNode, although the flag turns that off")
	}
}
