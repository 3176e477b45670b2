package digitalocean

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"
)

// A DELETE of a node or a pool is sent once (see callKind once) and its
// answer settled here, for DeleteNodes and Delete:
//   - 2xx: done.
//   - 404: done. The node or pool was in the last listing and this
//     autoscaler asked for it to go: it went already (an earlier DELETE
//     whose answer was lost, in this process or the one before).
//   - an unclear answer (maybeApplied: a 5xx, a cut connection): the
//     listing tells. The node or pool gone, or listed with its nodes
//     draining or deleting, is done. Listed as it was, the DELETE was not
//     applied, or the listing lags it: the DELETE is sent once more, which
//     is then no blind repetition, since either answer is safe (an applied
//     one makes it 404 or a no-op on a node already going).
//   - any other 4xx: refused; the caller gives the nodes back.
//
// Reporting an applied deletion as failed is what must not happen: the
// core then untaints the nodes while DOKS deletes them, and the pods it
// evicted land on them again.

// isNotFound reports whether err is DigitalOcean's 404.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// leaving reports whether DOKS is draining or deleting the node.
func leaving(n *godo.KubernetesNode) bool {
	return n != nil && n.Status != nil && (n.Status.State == "draining" || n.Status.State == "deleting")
}

// poolLeaving reports whether every node of a listed pool is draining or
// deleting: what a pool being deleted looks like (DOKS has no state for a
// pool), as long as it has nodes.
func poolLeaving(p *godo.KubernetesNodePool) bool {
	if len(p.Nodes) == 0 {
		return false
	}
	for _, n := range p.Nodes {
		if !leaving(n) {
			return false
		}
	}
	return true
}

// beingDeleted reports whether a listed pool is one this autoscaler
// deleted, as far as the listing alone tells: a pool it created whose
// nodes are all leaving. DOKS replaces a node it repairs with a
// provisioning one, and this autoscaler deletes a pool it created in place
// of its last nodes, so such a pool is being deleted. A restarted
// autoscaler, which no longer remembers deleting it, must neither make it
// a node group again nor give its nodes back.
func beingDeleted(p *godo.KubernetesNodePool) bool {
	return isAutoprovisioned(p) && poolLeaving(p)
}

func findPool(pools []*godo.KubernetesNodePool, id string) *godo.KubernetesNodePool {
	for _, p := range pools {
		if p != nil && p.ID == id {
			return p
		}
	}
	return nil
}

func findNode(p *godo.KubernetesNodePool, id string) *godo.KubernetesNode {
	for _, n := range p.Nodes {
		if n != nil && n.ID == id {
			return n
		}
	}
	return nil
}

// deleteNode deletes a node of the pool and settles the answer; nil means
// DOKS is deleting the node or has deleted it.
func (m *manager) deleteNode(poolID, nodeID string) error {
	err := m.client.deleteNode(m.ctx, poolID, nodeID)
	if err == nil || isNotFound(err) || !maybeApplied(err) {
		return notFoundIsDone(err)
	}
	pools, lerr := m.client.listNodePools(m.ctx)
	if lerr != nil {
		return fmt.Errorf("%w; listing the pools to see whether it was applied failed: %v", err, lerr)
	}
	p := findPool(pools, poolID)
	var n *godo.KubernetesNode
	if p != nil {
		n = findNode(p, nodeID)
	}
	if n == nil || leaving(n) {
		klog.InfoS("Node deletion answered unclearly but applied: the listing shows the node going or gone", "nodeGroup", poolID, "nodeID", nodeID, "answer", err)
		return nil
	}
	klog.InfoS("Node deletion answered unclearly and the listing still shows the node: asking once more", "nodeGroup", poolID, "nodeID", nodeID, "answer", err)
	return notFoundIsDone(m.client.deleteNode(m.ctx, poolID, nodeID))
}

// deletePool deletes the pool and settles the answer; nil means DOKS is
// deleting the pool or has deleted it.
func (m *manager) deletePool(poolID string) error {
	err := m.client.deleteNodePool(m.ctx, poolID)
	if err == nil || isNotFound(err) || !maybeApplied(err) {
		return notFoundIsDone(err)
	}
	pools, lerr := m.client.listNodePools(m.ctx)
	if lerr != nil {
		return fmt.Errorf("%w; listing the pools to see whether it was applied failed: %v", err, lerr)
	}
	if p := findPool(pools, poolID); p == nil || poolLeaving(p) {
		klog.InfoS("Node pool deletion answered unclearly but applied: the listing shows the pool going or gone", "nodeGroup", poolID, "answer", err)
		return nil
	}
	klog.InfoS("Node pool deletion answered unclearly and the listing still shows the pool: asking once more", "nodeGroup", poolID, "answer", err)
	return notFoundIsDone(m.client.deleteNodePool(m.ctx, poolID))
}

// notFoundIsDone turns a 404 on a DELETE into success.
func notFoundIsDone(err error) error {
	if isNotFound(err) {
		klog.V(2).InfoS("DELETE answered 404: already gone", "answer", err)
		return nil
	}
	return err
}
