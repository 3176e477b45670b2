package core

import (
	"errors"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/informercache"
)

// clusterCache is what the autoscaler reads of the API server: shared
// informers, their objects trimmed for memory (informercache), and their
// listers. Each iteration's clusterView is read from it.
type clusterCache struct {
	factory   informers.SharedInformerFactory
	nsFactory informers.SharedInformerFactory
	nodes     corelisters.NodeLister
	pods      corelisters.PodLister
	pdbs      policylisters.PodDisruptionBudgetLister
	dss       appslisters.DaemonSetLister
	rss       appslisters.ReplicaSetLister
	sss       appslisters.StatefulSetLister
	rcs       corelisters.ReplicationControllerLister
	jobs      batchlisters.JobLister
	// Dynamic Resource Allocation (resource.k8s.io/v1): devices published
	// per node, the classes that select them, pods' claims and the
	// templates claims are made from.
	resourceSlices resourcelisters.ResourceSliceLister
	deviceClasses  resourcelisters.DeviceClassLister
	resourceClaims resourcelisters.ResourceClaimLister
	claimTemplates resourcelisters.ResourceClaimTemplateLister
}

// newClusterCache registers the informers: nodes, pods, PDBs, DaemonSets,
// the controllers the drain rules read, ConfigMaps in opts.Namespace (the
// priority expander's) and, when the cluster serves it, DRA's objects.
// Run starts them.
func newClusterCache(kube kubernetes.Interface, opts config.AutoscalingOptions) (clusterCache, error) {
	var c clusterCache
	// What nothing here reads is dropped from cached objects, and what
	// pods and nodes repeat is shared: with tens of thousands of pods they
	// are a large share of the cache's memory. Each informer's trim is set
	// where it is registered (informercache).
	c.factory = informercache.NewFactory(kube)
	c.nsFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(opts.Namespace))

	nodeInf := c.factory.Core().V1().Nodes()
	podInf := c.factory.Core().V1().Pods()
	pdbInf := c.factory.Policy().V1().PodDisruptionBudgets()
	dsInf := c.factory.Apps().V1().DaemonSets()
	// Controllers, for the drain rules' "controller exists" and
	// --min-replica-count checks.
	rsInf, ssInf := c.factory.Apps().V1().ReplicaSets(), c.factory.Apps().V1().StatefulSets()
	rcInf, jobInf := c.factory.Core().V1().ReplicationControllers(), c.factory.Batch().V1().Jobs()
	cached := informercache.New()
	if err := errors.Join(cached.Nodes(nodeInf), cached.Pods(podInf), informercache.Templates(dsInf.Informer(),
		rsInf.Informer(), ssInf.Informer(), rcInf.Informer(), jobInf.Informer())); err != nil {
		return c, fmt.Errorf("core: informer transforms: %w", err)
	}
	cmInf := c.nsFactory.Core().V1().ConfigMaps()
	c.nodes, c.pods, c.pdbs, c.dss = nodeInf.Lister(), podInf.Lister(), pdbInf.Lister(), dsInf.Lister()
	c.rss, c.sss, c.rcs, c.jobs = rsInf.Lister(), ssInf.Lister(), rcInf.Lister(), jobInf.Lister()
	c.setDRAListers(opts.DynamicResourceAllocationEnabled)
	_ = cmInf.Informer()

	return c, nil
}

// setDRAListers reads the DRA objects from informers, or, when enabled is
// off (opts.DynamicResourceAllocationEnabled) (the cluster does not serve
// resource.k8s.io/v1), from empty stores: no informer is registered for an
// API the server lacks, whose caches would never sync, and the simulation
// then sees a cluster without devices or claims.
func (c *clusterCache) setDRAListers(enabled bool) {
	if !enabled {
		empty := func() cache.Indexer {
			return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		}
		c.resourceSlices = resourcelisters.NewResourceSliceLister(empty())
		c.deviceClasses = resourcelisters.NewDeviceClassLister(empty())
		c.resourceClaims = resourcelisters.NewResourceClaimLister(empty())
		c.claimTemplates = resourcelisters.NewResourceClaimTemplateLister(empty())
		return
	}
	dra := c.factory.Resource().V1()
	c.resourceSlices = dra.ResourceSlices().Lister()
	c.deviceClasses = dra.DeviceClasses().Lister()
	c.resourceClaims = dra.ResourceClaims().Lister()
	c.claimTemplates = dra.ResourceClaimTemplates().Lister()
}
