package scaleup

import (
	"fmt"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Taints a real node may carry that a brand-new node of its group will not.
var transientTaints = map[string]bool{
	clusterstate.ToBeDeletedTaint:                    true,
	clusterstate.DeletionCandidateTaint:              true,
	apiv1.TaintNodeNotReady:                          true,
	apiv1.TaintNodeUnreachable:                       true,
	apiv1.TaintNodeUnschedulable:                     true,
	apiv1.TaintNodeMemoryPressure:                    true,
	apiv1.TaintNodeDiskPressure:                      true,
	apiv1.TaintNodePIDPressure:                       true,
	apiv1.TaintNodeNetworkUnavailable:                true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
}

// Templates are one iteration's node group templates.
type Templates struct {
	// ByGroup: per group id, what a new node of the group looks like.
	ByGroup map[string]*framework.NodeInfo
	// Errors: the groups without a template, and why.
	Errors map[string]error
	// DRAMismatches counts, by driver and kind (Missing, Extra,
	// Mismatch), where a provider template's predicted devices and a
	// ready node's ResourceSlices disagree
	// (dra_node_template_resources_mismatch, which the reporter sets).
	DRAMismatches map[[2]string]int
}

// BuildTemplates returns, per group id, what a new node of the group looks
// like, with the DaemonSet pods that would start on it.
//
// The provider's TemplateNodeInfo comes first: on DOKS it is built from the
// pool's current spec, so it is right even after the pool's labels or taints
// were edited and before any node of the new spec exists. Only when the
// provider cannot give a template is one built from a ready node of the
// group that is not cordoned, with node-specific state (name, provider ID,
// conditions' transient taints) stripped. Groups with neither are left out and logged.
// Startup and status taints (see clusterstate.TaintConfig) are left out of
// every template: a new node carries them only for a while.
//
// Devices (DRA): when a ready node of the group publishes ResourceSlices
// (nodeSlices, nil when the cluster has none), the template carries copies
// of them, as upstream's templates from real nodes do: the driver's own
// description of the node beats any prediction. A provider template that
// predicted other devices is counted in dra_node_template_resources_mismatch.
func BuildTemplates(provider cloudprovider.CloudProvider, groups []clusterstate.NodeGroupState, nodes []*apiv1.Node,
	nodeGroupOf func(string) string, ready func(*apiv1.Node) bool, daemonSets []*appsv1.DaemonSet, checker *simulator.PredicateChecker,
	taints clusterstate.TaintConfig, nodeSlices func(nodeName string) []*resourceapi.ResourceSlice) Templates {
	publishes := func(name string) bool { return nodeSlices != nil && len(nodeSlices(name)) > 0 }
	mismatches := map[[2]string]int{}
	templates := make(map[string]*framework.NodeInfo, len(groups))
	errs := map[string]error{}
	// A ready node per group, for the fallback and for its devices; stable
	// choice by name. Found only when needed: the DigitalOcean provider's
	// templates never need it, and a pass over every node was a tenth of
	// a consolidation plan at 5,000 nodes.
	readyNode := sync.OnceValue(func() map[string]*apiv1.Node {
		out := map[string]*apiv1.Node{}
		for _, n := range nodes {
			id := nodeGroupOf(n.Name)
			// A cordoned node is no model: what got it cordoned may be in
			// its labels or taints (upstream at
			// --scale-from-unschedulable=false). A node not ready yet
			// (startup taint, GPU not advertised) would give a template
			// without what its pods need (ready: the cluster state
			// registry's rule).
			if id == "" || n.Spec.Unschedulable || !ready(n) {
				continue
			}
			if cur := out[id]; cur == nil || n.Name < cur.Name {
				out[id] = n
			}
		}
		return out
	})
	for _, gs := range groups {
		id := gs.Group.Id()
		base, err := gs.Group.TemplateNodeInfo()
		if err != nil || base == nil || base.Node() == nil {
			n := readyNode()[id]
			if n == nil {
				if err == nil {
					err = fmt.Errorf("provider returned no template")
				}
				errs[id] = fmt.Errorf("no template for node group %s and no ready node to copy: %v", id, err)
				continue
			}
			klog.V(4).InfoS("Provider template unavailable; using a node of the group as template", "nodeGroup", id, "node", klog.KObj(n), "err", err)
			base = templateFromNode(n, id)
		}
		if n := taints.WithoutTransientTaints(base.Node()); n != base.Node() {
			slices := base.ResourceSlices()
			base = framework.NewNodeInfo(n, base.Pods()...)
			base.SetResourceSlices(slices)
		}
		if nodeSlices != nil {
			if n := readyNode()[id]; n != nil && publishes(n.Name) {
				base = withNodeSlices(base, nodeSlices(n.Name), id, mismatches)
			}
		}
		ni, err := simulator.SanitizedTemplateNodeInfo(base, "template-"+id, daemonSets, checker)
		if err != nil {
			errs[id] = fmt.Errorf("node group %s: preparing template: %w", id, err)
			continue
		}
		templates[id] = ni
	}
	return Templates{ByGroup: templates, Errors: errs, DRAMismatches: mismatches}
}

// withNodeSlices returns template carrying a ready node's slices instead of
// its own, and records where the two disagree on the devices a node of the
// group publishes.
func withNodeSlices(template *framework.NodeInfo, fromNode []*resourceapi.ResourceSlice, groupID string, mismatches map[[2]string]int) *framework.NodeInfo {
	predicted := template.ResourceSlices()
	if len(predicted) > 0 {
		for _, m := range dra.CompareDevices(predicted, fromNode) {
			klog.V(2).InfoS("Node group template predicts other devices than its ready node publishes; the node's are used",
				"nodeGroup", groupID, "driver", m.Driver, "mismatch", m.Kind, "detail", m.Detail)
			mismatches[[2]string{m.Driver, m.Kind}]++
		}
	}
	out := framework.NewNodeInfo(template.Node(), template.Pods()...)
	out.SetResourceSlices(fromNode)
	return out
}

// templateFromNode copies a real node into a template: node-specific
// identity and transient state removed, no pods (DaemonSet pods are added
// by SanitizedTemplateNodeInfo).
func templateFromNode(n *apiv1.Node, groupID string) *framework.NodeInfo {
	c := n.DeepCopy()
	c.Name = "template-" + groupID
	c.UID = ""
	c.ResourceVersion = ""
	c.Spec.ProviderID = ""
	c.Spec.Unschedulable = false
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[apiv1.LabelHostname] = c.Name
	var taints []apiv1.Taint
	for _, t := range c.Spec.Taints {
		if !transientTaints[t.Key] {
			taints = append(taints, t)
		}
	}
	c.Spec.Taints = taints
	return framework.NewNodeInfo(c)
}

// CloneTemplate returns a copy of template as a distinct node named
// "<template node>-<suffix>", its pods renamed and bound to it, its
// ResourceSlices copied with their pools renamed.
func CloneTemplate(template *framework.NodeInfo, suffix string) *framework.NodeInfo {
	node := template.Node().DeepCopy()
	node.Name = template.Node().Name + "-" + suffix
	node.UID = types.UID(node.Name)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[apiv1.LabelHostname] = node.Name
	pods := make([]*apiv1.Pod, 0, len(template.Pods()))
	for _, p := range template.Pods() {
		c := p.DeepCopy()
		c.Name = p.Name + "-" + suffix
		c.UID = types.UID(string(p.UID) + "-" + suffix)
		c.Spec.NodeName = node.Name
		pods = append(pods, c)
	}
	out := framework.NewNodeInfo(node, pods...)
	out.SetResourceSlices(dra.SanitizedNodeSlices(template.ResourceSlices(), node.Name, suffix))
	return out
}

// AddUpcomingNodes puts one template node per upcoming node of each group
// into the snapshot, so pending pods that will land on them are not counted
// twice. Returns the number added per group and the names of the nodes.
func AddUpcomingNodes(s *simulator.ClusterSnapshot, groups []clusterstate.NodeGroupState, templates map[string]*framework.NodeInfo) (added map[string]int, names map[string]bool, err error) {
	added, names = map[string]int{}, map[string]bool{}
	ids := make([]string, 0, len(groups))
	byID := map[string]clusterstate.NodeGroupState{}
	for _, gs := range groups {
		ids = append(ids, gs.Group.Id())
		byID[gs.Group.Id()] = gs
	}
	sort.Strings(ids)
	for _, id := range ids {
		gs := byID[id]
		if gs.Upcoming == 0 {
			continue
		}
		t := templates[id]
		if t == nil {
			klog.InfoS("Node group has upcoming nodes but no template; they are not simulated", "nodeGroup", id, "upcoming", gs.Upcoming)
			continue
		}
		for i := 0; i < gs.Upcoming; i++ {
			n := CloneTemplate(t, fmt.Sprintf("upcoming-%d", i))
			if err := s.AddNodeInfo(n); err != nil {
				return added, names, fmt.Errorf("adding upcoming node of group %s: %w", id, err)
			}
			added[id]++
			names[n.Node().Name] = true
		}
	}
	return added, names, nil
}
