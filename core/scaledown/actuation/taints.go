package actuation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// MarkToBeDeleted adds the ToBeDeletedByClusterAutoscaler taint and, with
// cordon (--cordon-node-before-terminating), marks the node unschedulable in
// the same update, as upstream does. Returns false (no error) when the node
// already carries the taint. A cached copy of the node, when given, is
// updated directly: its resourceVersion makes the update fail on a newer
// node, which is then read again. That saves a read per node, and the
// client's QPS is what bounds how fast a batch of nodes is tainted.
func MarkToBeDeleted(ctx context.Context, kube kubernetes.Interface, nodeName string, cached *apiv1.Node, now time.Time, cordon bool) (bool, error) {
	added := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := cached
		cached = nil
		if node == nil || node.ResourceVersion == "" {
			var err error
			if node, err = kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if clusterstate.HasToBeDeletedTaint(node) {
			added = false
			return nil
		}
		node = node.DeepCopy()
		node.Spec.Taints = append(node.Spec.Taints, apiv1.Taint{
			Key:    clusterstate.ToBeDeletedTaint,
			Value:  strconv.FormatInt(now.Unix(), 10),
			Effect: apiv1.TaintEffectNoSchedule,
		})
		if cordon {
			node.Spec.Unschedulable = true
		}
		_, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		added = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("tainting node %s: %w", nodeName, err)
	}
	return added, nil
}

// UnmarkToBeDeleted drops ToBeDeletedByClusterAutoscaler and
// DeletionCandidateOfClusterAutoscaler from the node and, with uncordon,
// makes a node that carried the first schedulable again (the autoscaler
// cordoned it along with the taint). A node that no longer exists is not
// an error.
func UnmarkToBeDeleted(ctx context.Context, kube kubernetes.Interface, nodeName string, uncordon bool) (bool, error) {
	removed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []apiv1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != clusterstate.ToBeDeletedTaint && t.Key != clusterstate.DeletionCandidateTaint {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			removed = false
			return nil
		}
		marked := clusterstate.HasToBeDeletedTaint(node)
		node = node.DeepCopy()
		node.Spec.Taints = keep
		if uncordon && marked {
			node.Spec.Unschedulable = false
		}
		_, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		removed = err == nil
		return err
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing autoscaler taints from node %s: %w", nodeName, err)
	}
	return removed, nil
}

// LeavingInstances lists the provider IDs of the tainted nodes' instances
// that are on their way out: those the provider reports as being deleted,
// in its node groups or, when it is a DeletingInstancesReporter, anywhere
// (a group being deleted is no node group any more), and those it no
// longer has at all (a Node outlives its instance for a while). A new
// leader must not give such nodes back: the drain was done, and DOKS
// deletes them without another.
func LeavingInstances(provider cloudprovider.CloudProvider, nodes []*apiv1.Node) map[string]bool {
	out := map[string]bool{}
	if r, ok := provider.(cloudprovider.DeletingInstancesReporter); ok {
		maps.Copy(out, r.DeletingInstances())
	}
	for _, g := range provider.NodeGroups() {
		instances, err := g.Nodes()
		if err != nil {
			continue
		}
		for _, in := range instances {
			if in.Status != nil && in.Status.State == cloudprovider.InstanceDeleting {
				out[in.Id] = true
			}
		}
	}
	for _, n := range nodes {
		if n.Spec.ProviderID == "" || !clusterstate.HasToBeDeletedTaint(n) {
			continue
		}
		if has, err := provider.HasInstance(n); err == nil && !has {
			out[n.Spec.ProviderID] = true
		}
	}
	return out
}

// CleanUpStaleTaints removes the autoscaler's taints from every node: taints
// left by an earlier run that died mid-drain would otherwise keep those
// nodes unschedulable forever. A node whose instance is leaving (its
// provider ID in leaving: see LeavingInstances) keeps its ToBeDeleted
// taint: the cloud is removing it or has, and since the drain is already
// done (deletes skip the cloud's drain), pods scheduled there would be
// killed without one. With
// keepSoftTaints (soft tainting on), a node carrying only the
// DeletionCandidate taint keeps it, as upstream's clean-up does: the first
// loop takes it off the nodes that are needed. nodes are read from the
// informer's cache, as upstream's clean-up does (a fresh list of every node
// costs seconds at 5,000 nodes); each node to untaint is read again before
// its update.
func CleanUpStaleTaints(ctx context.Context, kube kubernetes.Interface, nodes []*apiv1.Node, leaving map[string]bool, keepSoftTaints bool) error {
	var errs []error
	for _, n := range nodes {
		stale := false
		for _, t := range n.Spec.Taints {
			if t.Key == clusterstate.ToBeDeletedTaint || (t.Key == clusterstate.DeletionCandidateTaint && !keepSoftTaints) {
				stale = true
			}
		}
		if !stale {
			continue
		}
		if n.Spec.ProviderID != "" && leaving[n.Spec.ProviderID] {
			klog.InfoS("Start-up: keeping the autoscaler taint: the node's instance is being deleted or gone", "node", klog.KObj(n), "providerID", n.Spec.ProviderID)
			continue
		}
		removed, err := UnmarkToBeDeleted(ctx, kube, n.Name, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if removed {
			klog.InfoS("Start-up: removed a stale autoscaler taint left by an earlier run", "node", klog.KObj(n))
		}
	}
	// Every node that kept its taint is named, in one error the caller logs.
	return errors.Join(errs...)
}
