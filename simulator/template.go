package simulator

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Taint keys the autoscaler puts on nodes it is removing; a new node never
// has them.
const (
	ToBeDeletedTaint       = "ToBeDeletedByClusterAutoscaler"
	DeletionCandidateTaint = "DeletionCandidateOfClusterAutoscaler"
)

// DaemonSetPodAnnotation marks a pod as a DaemonSet pod even without an
// owner reference (upstream's key).
const DaemonSetPodAnnotation = "cluster-autoscaler.kubernetes.io/daemonset-pod"

// SanitizedTemplateNodeInfo returns a copy of template for one simulated new
// node: the node is named "<template name>-<suffix>" (kubernetes.io/hostname
// follows, so per-host topology sees it as a host of its own), is
// schedulable and carries no autoscaler deletion taints; the template's pods
// are copied with unique names and bound to it; and a pod is added for every
// DaemonSet in daemonSets whose pod template the framework says fits the node
// (DaemonSets already represented among the template's pods are not added
// twice). The template's ResourceSlices are copied for the new node, with
// slice and pool names made unique (dra.SanitizedNodeSlices), so that every
// simulated node has devices of its own. c may be nil when daemonSets is
// empty.
func SanitizedTemplateNodeInfo(template *framework.NodeInfo, suffix string, daemonSets []*appsv1.DaemonSet, c *PredicateChecker) (*framework.NodeInfo, error) {
	if template == nil || template.Node() == nil {
		return nil, fmt.Errorf("template without a node")
	}
	if len(daemonSets) > 0 && c == nil {
		return nil, fmt.Errorf("a predicate checker is needed to place DaemonSet pods")
	}
	node := template.Node().DeepCopy()
	name := template.Node().Name + "-" + suffix
	node.Name = name
	node.UID = types.UID(name)
	node.ResourceVersion = ""
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[apiv1.LabelHostname] = name
	node.Spec.Unschedulable = false
	taints := node.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint || t.Key == DeletionCandidateTaint {
			continue
		}
		taints = append(taints, t)
	}
	node.Spec.Taints = taints

	present := map[types.UID]bool{}
	pods := make([]*apiv1.Pod, 0, len(template.Pods())+len(daemonSets))
	for _, p := range template.Pods() {
		cp := p.DeepCopy()
		cp.Name = p.Name + "-" + suffix
		cp.UID = types.UID(string(p.UID) + "-" + suffix)
		cp.Spec.NodeName = name
		cp.ResourceVersion = ""
		pods = append(pods, cp)
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "DaemonSet" {
			present[ref.UID] = true
		}
	}
	out := framework.NewNodeInfo(node, pods...)
	out.SetResourceSlices(dra.SanitizedNodeSlices(template.ResourceSlices(), name, suffix))
	if len(daemonSets) == 0 {
		return out, nil
	}

	// Check DaemonSet pods one by one on a snapshot holding only this node,
	// each seeing the ones added before it: they all occupy the new node.
	snap := NewClusterSnapshot()
	if err := snap.AddNodeInfo(out); err != nil {
		return nil, err
	}
	for _, ds := range daemonSets {
		if ds == nil || present[ds.UID] {
			continue
		}
		pod := daemonSetPod(ds, name, suffix)
		if perr := c.SchedulePod(snap, pod, nil, name); perr != nil {
			if perr.IsInternal() {
				return nil, fmt.Errorf("checking DaemonSet %s/%s on template %s: %w", ds.Namespace, ds.Name, name, perr)
			}
			klog.V(4).InfoS("Template: DaemonSet would not run there", "template", name, "daemonSet", klog.KObj(ds), "reason", perr.Error())
			continue
		}
		out.AddPod(pod)
	}
	return out, nil
}

// daemonSetPod builds the pod the DaemonSet controller would create on
// nodeName, including the tolerations that controller adds to every
// DaemonSet pod.
func daemonSetPod(ds *appsv1.DaemonSet, nodeName, suffix string) *apiv1.Pod {
	ctrl := true
	pod := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s", ds.Name, suffix),
			Namespace:   ds.Namespace,
			UID:         types.UID(fmt.Sprintf("%s-%s", ds.UID, suffix)),
			Labels:      maps.Clone(ds.Spec.Template.Labels),
			Annotations: maps.Clone(ds.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrl,
			}},
		},
		Spec:   *ds.Spec.Template.Spec.DeepCopy(),
		Status: apiv1.PodStatus{Phase: apiv1.PodRunning},
	}
	pod.Spec.NodeName = nodeName
	addDaemonSetTolerations(pod)
	return pod
}

// addDaemonSetTolerations adds what the DaemonSet controller adds: DaemonSet
// pods keep running on not-ready, unreachable, pressured and cordoned nodes.
func addDaemonSetTolerations(pod *apiv1.Pod) {
	add := func(key string, effect apiv1.TaintEffect) {
		for _, t := range pod.Spec.Tolerations {
			if t.Key == key && t.Effect == effect && t.Operator == apiv1.TolerationOpExists {
				return
			}
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, apiv1.Toleration{Key: key, Operator: apiv1.TolerationOpExists, Effect: effect})
	}
	add(apiv1.TaintNodeNotReady, apiv1.TaintEffectNoExecute)
	add(apiv1.TaintNodeUnreachable, apiv1.TaintEffectNoExecute)
	add(apiv1.TaintNodeDiskPressure, apiv1.TaintEffectNoSchedule)
	add(apiv1.TaintNodeMemoryPressure, apiv1.TaintEffectNoSchedule)
	add(apiv1.TaintNodePIDPressure, apiv1.TaintEffectNoSchedule)
	add(apiv1.TaintNodeUnschedulable, apiv1.TaintEffectNoSchedule)
	if pod.Spec.HostNetwork {
		add(apiv1.TaintNodeNetworkUnavailable, apiv1.TaintEffectNoSchedule)
	}
}
