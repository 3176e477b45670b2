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
)

// NodeInfo is a node and the pods on it.
type NodeInfo struct {
	node *apiv1.Node
	pods []*apiv1.Pod
}

// NewNodeInfo returns a NodeInfo holding node and pods.
func NewNodeInfo(node *apiv1.Node, pods ...*apiv1.Pod) *NodeInfo {
	return &NodeInfo{node: node, pods: slices.Clone(pods)}
}

// Node returns the node.
func (n *NodeInfo) Node() *apiv1.Node { return n.node }

// Pods returns the pods on the node. Callers must not modify the slice.
func (n *NodeInfo) Pods() []*apiv1.Pod { return n.pods }

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
	return out
}
