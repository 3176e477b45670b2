// Package framework holds the project's own node description: a Node plus the
// pods scheduled on it (or, for a template, the pods a new node starts with,
// such as DaemonSet pods), and the pod helpers every layer shares, so that
// the provider, the simulator and the core count a pod the same way. It
// depends on the scheduler's small resource helper (k8s.io/component-helpers)
// but not on the scheduler framework, so that providers can build it cheaply.
package framework

import (
	"slices"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// NodeInfo is a node and the pods on it, plus the ResourceSlices that
// publish its devices for Dynamic Resource Allocation (none on most nodes).
type NodeInfo struct {
	node   *apiv1.Node
	pods   []*apiv1.Pod
	slices []*resourceapi.ResourceSlice
}

// NewNodeInfo returns a NodeInfo holding node and pods.
func NewNodeInfo(node *apiv1.Node, pods ...*apiv1.Pod) *NodeInfo {
	return &NodeInfo{node: node, pods: slices.Clone(pods)}
}

// Node returns the node.
func (n *NodeInfo) Node() *apiv1.Node { return n.node }

// Pods returns the pods on the node. Callers must not modify the slice.
func (n *NodeInfo) Pods() []*apiv1.Pod { return n.pods }

// ResourceSlices returns the slices local to the node. Callers must not
// modify the slice.
func (n *NodeInfo) ResourceSlices() []*resourceapi.ResourceSlice { return n.slices }

// SetResourceSlices replaces the node's slices. A template's slices say
// which devices a new node of its group will publish.
func (n *NodeInfo) SetResourceSlices(s []*resourceapi.ResourceSlice) { n.slices = slices.Clone(s) }

// AddPod adds a pod to the node.
func (n *NodeInfo) AddPod(pod *apiv1.Pod) { n.pods = append(n.pods, pod) }

// DeepCopy returns a copy that shares nothing with n.
func (n *NodeInfo) DeepCopy() *NodeInfo {
	out := &NodeInfo{pods: make([]*apiv1.Pod, 0, len(n.pods))}
	if n.node != nil {
		out.node = n.node.DeepCopy()
	}
	for _, p := range n.pods {
		out.pods = append(out.pods, p.DeepCopy())
	}
	for _, s := range n.slices {
		out.slices = append(out.slices, s.DeepCopy())
	}
	return out
}
