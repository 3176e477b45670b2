package test

import (
	"maps"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

// BuildNode returns a ready, schedulable node with the given cpu (millicores)
// and memory (bytes) as both capacity and allocatable, and room for 110 pods:
// the simulator's test node, with a provider ID and a creation time.
func BuildNode(name string, milliCPU, memBytes int64) *apiv1.Node {
	n := testutil.Node(name, milliCPU, memBytes)
	n.CreationTimestamp = metav1.NewTime(referenceTime)
	n.Spec.ProviderID = "test://" + name
	n.Status.Phase = apiv1.NodeRunning
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(referenceTime)
	return n
}

// referenceTime is when test objects were created.
var referenceTime = time.Unix(1_700_000_000, 0)

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
	maps.Copy(n.Labels, labels)
	n.Spec.Taints = taints
	return framework.NewNodeInfo(n)
}

// BuildPod returns a pod in namespace "default" requesting milliCPU and
// memBytes, owned by a ReplicaSet named owner (no owner when empty),
// created an hour before the reference time.
func BuildPod(name string, milliCPU, memBytes int64, owner string) *apiv1.Pod {
	p := testutil.Pod(name, milliCPU, memBytes)
	p.CreationTimestamp = metav1.NewTime(referenceTime)
	p.Status.Phase = apiv1.PodRunning
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

// BuildRegisteredNodes builds, for the group's instances still being
// created, the Nodes they register as (2000m CPU, 4 GiB), created at created
// and ready or not since then.
func BuildRegisteredNodes(g *NodeGroup, created time.Time, ready bool) []*apiv1.Node {
	var out []*apiv1.Node
	ins, _ := g.Nodes()
	for _, in := range ins {
		if in.Status != nil && in.Status.State == cloudprovider.InstanceCreating {
			n := BuildNode(strings.TrimPrefix(in.Id, "test://"), 2000, 4*GiB)
			n.Spec.ProviderID = in.Id
			n.CreationTimestamp = metav1.NewTime(created)
			SetNodeReady(n, ready, created)
			out = append(out, n)
		}
	}
	return out
}
