package simulator

import (
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func TestSanitizedTemplateNodeInfo(t *testing.T) {
	c := testChecker(t)
	tmplNode := WithLabel(Node("pool-a-template", 4000, 8*GiB), "doks.digitalocean.com/node-pool", "pool-a")
	WithTaint(tmplNode, ToBeDeletedTaint, "123", apiv1.TaintEffectNoSchedule)
	WithTaint(tmplNode, "dedicated", "batch", apiv1.TaintEffectNoSchedule)
	tmplNode.Spec.Unschedulable = true
	static := BoundPod("kube-proxy", 100, 64*MiB, "pool-a-template")
	static.Namespace = "kube-system"
	static.Annotations = map[string]string{drain.MirrorPodKey: "x"}
	template := framework.NewNodeInfo(tmplNode, static)

	logs := DaemonSet("logs", 200, 128*MiB) // tolerates nothing special: the DS controller's tolerations only
	logs.Spec.Template.Spec.Tolerations = []apiv1.Toleration{{Operator: apiv1.TolerationOpExists}}
	gpuOnly := DaemonSet("gpu-driver", 100, 64*MiB)
	gpuOnly.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "true"}
	untolerated := DaemonSet("monitor", 100, 64*MiB) // does not tolerate dedicated=batch
	tooBig := DaemonSet("hog", 8000, 64*MiB)
	tooBig.Spec.Template.Spec.Tolerations = []apiv1.Toleration{{Operator: apiv1.TolerationOpExists}}

	ni, err := SanitizedTemplateNodeInfo(template, "x1", []*appsv1.DaemonSet{logs, gpuOnly, untolerated, tooBig}, c)
	if err != nil {
		t.Fatal(err)
	}
	n := ni.Node()
	if n.Name != "pool-a-template-x1" || n.Labels[apiv1.LabelHostname] != "pool-a-template-x1" {
		t.Errorf("name %q hostname %q", n.Name, n.Labels[apiv1.LabelHostname])
	}
	if n.Spec.Unschedulable {
		t.Errorf("a new node is not cordoned")
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v, want only dedicated", n.Spec.Taints)
	}
	if template.Node().Name != "pool-a-template" || len(template.Node().Spec.Taints) != 2 || len(template.Pods()) != 1 {
		t.Errorf("the template itself was modified")
	}
	var names []string
	for _, p := range ni.Pods() {
		names = append(names, p.Name)
		if p.Spec.NodeName != n.Name {
			t.Errorf("pod %s bound to %q", p.Name, p.Spec.NodeName)
		}
	}
	sort.Strings(names)
	if want := []string{"kube-proxy-x1", "logs-x1"}; len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Fatalf("pods = %v, want %v", names, want)
	}
	for _, p := range ni.Pods() {
		if p.Name == "logs-x1" {
			if !drain.IsDaemonSetPod(p) {
				t.Errorf("DaemonSet pod not marked as owned by its DaemonSet: %v", p.OwnerReferences)
			}
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != logs.UID {
				t.Errorf("owner = %v", ref)
			}
		}
	}

	// A second copy gets distinct names; a DaemonSet already among the
	// template's pods is not added again.
	ni2, err := SanitizedTemplateNodeInfo(ni, "x2", []*appsv1.DaemonSet{logs}, c)
	if err != nil {
		t.Fatal(err)
	}
	if ni2.Node().Name != "pool-a-template-x1-x2" || len(ni2.Pods()) != 2 {
		t.Errorf("second copy: %s with %d pods", ni2.Node().Name, len(ni2.Pods()))
	}
	if _, err := SanitizedTemplateNodeInfo(template, "x3", []*appsv1.DaemonSet{logs}, nil); err == nil {
		t.Errorf("DaemonSets without a checker must be refused")
	}
}
