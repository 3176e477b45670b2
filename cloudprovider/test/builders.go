package test

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// BuildNode returns a ready, schedulable node with the given cpu (millicores)
// and memory (bytes) as both capacity and allocatable, and room for 110 pods.
func BuildNode(name string, milliCPU, memBytes int64) *apiv1.Node {
	res := apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		apiv1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
		apiv1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID("uid-" + name),
			Labels:            map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)),
		},
		Spec: apiv1.NodeSpec{ProviderID: "test://" + name},
		Status: apiv1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Phase:       apiv1.NodeRunning,
			Conditions: []apiv1.NodeCondition{{
				Type: apiv1.NodeReady, Status: apiv1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_000, 0)),
			}},
		},
	}
}

// SetNodeReady sets the node's Ready condition, with the transition time.
func SetNodeReady(node *apiv1.Node, ready bool, since time.Time) {
	st := apiv1.ConditionFalse
	if ready {
		st = apiv1.ConditionTrue
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == apiv1.NodeReady {
			node.Status.Conditions[i].Status = st
			node.Status.Conditions[i].LastTransitionTime = metav1.NewTime(since)
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, apiv1.NodeCondition{
		Type: apiv1.NodeReady, Status: st, LastTransitionTime: metav1.NewTime(since)})
}

// BuildTemplate returns a template NodeInfo for a group: a node named
// "<group>-template" with the given resources and labels.
func BuildTemplate(group string, milliCPU, memBytes int64, labels map[string]string, taints ...apiv1.Taint) *framework.NodeInfo {
	n := BuildNode(group+"-template", milliCPU, memBytes)
	n.Spec.ProviderID = ""
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = taints
	return framework.NewNodeInfo(n)
}

// BuildPod returns a pod in namespace "default" requesting milliCPU and
// memBytes, owned by a ReplicaSet named owner (no owner when empty),
// created an hour before the reference time.
func BuildPod(name string, milliCPU, memBytes int64, owner string) *apiv1.Pod {
	p := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         "default",
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)),
		},
		Spec: apiv1.PodSpec{
			Containers: []apiv1.Container{{
				Name:  "c",
				Image: "registry.example/app:1",
				Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
					apiv1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
					apiv1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
				}},
			}},
		},
		Status: apiv1.PodStatus{Phase: apiv1.PodRunning},
	}
	if owner != "" {
		ctrl := true
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner,
			UID: types.UID("uid-rs-" + owner), Controller: &ctrl,
		}}
	}
	return p
}

// BuildScheduledPod is BuildPod bound to nodeName.
func BuildScheduledPod(name string, milliCPU, memBytes int64, owner, nodeName string) *apiv1.Pod {
	p := BuildPod(name, milliCPU, memBytes, owner)
	p.Spec.NodeName = nodeName
	return p
}

// BuildPendingPod is BuildPod marked unschedulable by the scheduler.
func BuildPendingPod(name string, milliCPU, memBytes int64, owner string) *apiv1.Pod {
	p := BuildPod(name, milliCPU, memBytes, owner)
	p.Status.Phase = apiv1.PodPending
	p.Status.Conditions = []apiv1.PodCondition{{
		Type:   apiv1.PodScheduled,
		Status: apiv1.ConditionFalse,
		Reason: apiv1.PodReasonUnschedulable,
	}}
	return p
}

// BuildDaemonSetPod is a pod owned by the named DaemonSet, bound to nodeName.
func BuildDaemonSetPod(name string, milliCPU, memBytes int64, ds, nodeName string) *apiv1.Pod {
	p := BuildPod(name, milliCPU, memBytes, "")
	ctrl := true
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds,
		UID: types.UID("uid-ds-" + ds), Controller: &ctrl,
	}}
	p.Spec.NodeName = nodeName
	return p
}

// GiB and MiB for readable test sizes.
const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)
