// Package testutil builds nodes, pods and controllers for simulation tests.
// Quantities are in millicores and bytes.
package testutil

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GiB is 2^30 bytes.
const GiB = int64(1) << 30

// MiB is 2^20 bytes.
const MiB = int64(1) << 20

// Node returns a Ready node with the given allocatable (= capacity) cpu and
// memory, room for 110 pods and the kubernetes.io/hostname label.
func Node(name string, milliCPU, memBytes int64) *apiv1.Node {
	rl := apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		apiv1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
		apiv1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			UID:    types.UID("node-uid-" + name),
			Labels: map[string]string{apiv1.LabelHostname: name, apiv1.LabelOSStable: "linux", apiv1.LabelArchStable: "amd64"},
		},
		Status: apiv1.NodeStatus{
			Capacity:    rl.DeepCopy(),
			Allocatable: rl,
			Conditions:  []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}},
		},
	}
}

// WithLabel sets a label on the node and returns it.
func WithLabel(n *apiv1.Node, key, value string) *apiv1.Node {
	n.Labels[key] = value
	return n
}

// WithGPU gives the node count GPUs of resource name.
func WithGPU(n *apiv1.Node, name apiv1.ResourceName, count int64) *apiv1.Node {
	q := *resource.NewQuantity(count, resource.DecimalSI)
	n.Status.Capacity[name] = q
	n.Status.Allocatable[name] = q
	return n
}

// WithTaint adds a taint to the node.
func WithTaint(n *apiv1.Node, key, value string, effect apiv1.TaintEffect) *apiv1.Node {
	n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Pod returns a pending pod in namespace "default" requesting cpu and memory
// in one container.
func Pod(name string, milliCPU, memBytes int64) *apiv1.Pod {
	return &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "default",
			UID:       types.UID("pod-uid-" + name),
			Labels:    map[string]string{},
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
		Status: apiv1.PodStatus{Phase: apiv1.PodPending},
	}
}

// BoundPod is Pod bound to nodeName and Running.
func BoundPod(name string, milliCPU, memBytes int64, nodeName string) *apiv1.Pod {
	p := Pod(name, milliCPU, memBytes)
	p.Spec.NodeName = nodeName
	p.Status.Phase = apiv1.PodRunning
	return p
}

// WithGPURequest makes the pod's container request count of resource name.
func WithGPURequest(p *apiv1.Pod, name apiv1.ResourceName, count int64) *apiv1.Pod {
	q := *resource.NewQuantity(count, resource.DecimalSI)
	p.Spec.Containers[0].Resources.Requests[name] = q
	if p.Spec.Containers[0].Resources.Limits == nil {
		p.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{}
	}
	p.Spec.Containers[0].Resources.Limits[name] = q
	return p
}

// OwnedBy sets a controller owner reference.
func OwnedBy(p *apiv1.Pod, kind, name string, uid types.UID) *apiv1.Pod {
	apiVersion := "apps/v1"
	switch kind {
	case "Job":
		apiVersion = "batch/v1"
	case "ReplicationController":
		apiVersion = "v1"
	}
	ctrl := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &ctrl}}
	return p
}

// ReplicaSetPods returns n pods owned by the ReplicaSet name, labelled app=name.
func ReplicaSetPods(name string, n int, milliCPU, memBytes int64) []*apiv1.Pod {
	pods := make([]*apiv1.Pod, 0, n)
	for i := 0; i < n; i++ {
		p := Pod(fmt.Sprintf("%s-%d", name, i), milliCPU, memBytes)
		p.Labels["app"] = name
		OwnedBy(p, "ReplicaSet", name, types.UID("rs-uid-"+name))
		pods = append(pods, p)
	}
	return pods
}

// WithHostPort makes the pod's container expose hostPort over TCP.
func WithHostPort(p *apiv1.Pod, port int32) *apiv1.Pod {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, apiv1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: apiv1.ProtocolTCP})
	return p
}

// WithAntiAffinity makes the pod refuse topologyKey domains holding pods
// labelled app=<the pod's app label>.
func WithAntiAffinity(p *apiv1.Pod, topologyKey string) *apiv1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &apiv1.Affinity{}
	}
	p.Spec.Affinity.PodAntiAffinity = &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
			TopologyKey:   topologyKey,
		}},
	}
	return p
}

// WithTopologySpread adds a DoNotSchedule spread constraint over
// topologyKey for pods labelled app=<the pod's app label>.
func WithTopologySpread(p *apiv1.Pod, topologyKey string, maxSkew int32) *apiv1.Pod {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, apiv1.TopologySpreadConstraint{
		MaxSkew:           maxSkew,
		TopologyKey:       topologyKey,
		WhenUnsatisfiable: apiv1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
	})
	return p
}

// DaemonSet returns a DaemonSet whose pods request cpu and memory and
// tolerate every taint (as most node agents do).
func DaemonSet(name string, milliCPU, memBytes int64) *appsv1.DaemonSet {
	tmpl := Pod(name, milliCPU, memBytes)
	tmpl.Labels["app"] = name
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID("ds-uid-" + name)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
}
