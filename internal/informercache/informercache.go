// Package informercache shapes what the autoscaler's informers keep: each
// kind's transform drops what no code path reads and shares what repeats
// across objects (strings, resource lists, label sets), so that a cluster's
// pods, nodes and workloads cost a fraction of their decoded size.
//
// A trim is a promise about readers and writers, so it is made per informer:
// the informer of a kind gets its transform where it is registered
// (SetTransform), next to the code that reads it. Informers registered by
// others (the scheduler framework's volume plugins) get Default, which drops
// only what nothing reads of any kind.
//
// Nothing trimmed may reach the API server. Every trimmed copy but a node
// carries a mark in its managedFields (and so does every pod template it
// holds, and every DeepCopy made of either); RefuseTrimmedWrites, on the
// autoscaler's clients, fails a write that carries it before it leaves the
// process. Writers read the live object (capacitybuffer/live.go). Nodes are
// the exception, by design: their trim reaches only the status, which a Node
// update ignores, so the taint updates may write a cached node back
// (TestNodeTrimLeavesWhatANodeUpdateWrites).
package informercache

import (
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NewFactory returns a shared informer factory whose informers apply
// Default until a kind's own transform replaces it.
func NewFactory(kube kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(Default))
}

// Cache holds what the transforms of pods and nodes share across objects.
// One per factory: two would each hold a copy of what repeats.
type Cache struct {
	tables *tables
}

// New returns a Cache with empty tables.
func New() *Cache { return &Cache{tables: newTables()} }

// Pods has inf keep trimmed pods (trimPod) whose equal maps and strings are
// shared. Call it before the informer starts.
func (c *Cache) Pods(inf coreinformers.PodInformer) error {
	return inf.Informer().SetTransform(c.pod)
}

// Nodes has inf keep nodes trimmed of status fields nothing reads
// (trimNodeStatus), their equal resource lists and strings shared. Call it
// before the informer starts.
func (c *Cache) Nodes(inf coreinformers.NodeInformer) error {
	return inf.Informer().SetTransform(c.node)
}

// Templates has each informer, of PodTemplates or of a workload that
// carries a pod template (ReplicaSets, Deployments, StatefulSets,
// DaemonSets, Jobs, ReplicationControllers), keep its templates trimmed as
// pods' specs are (trimPodSpec). A pod template becomes a pod here only in
// simulations. Call it before the informers start.
func Templates(infs ...cache.SharedIndexInformer) error {
	for _, inf := range infs {
		if err := inf.SetTransform(template); err != nil {
			return err
		}
	}
	return nil
}
