package controlplane

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// startControllers runs the kube-controller-manager controllers that workloads in the
// sandbox rely on: Deployments and ReplicaSets make pods, DaemonSets put pods on every
// node (the autoscaler treats those specially), the disruption controller keeps PDB status
// (disruptionsAllowed) current so the eviction API behaves as in a real cluster, and the
// garbage collector and namespace controller let tests delete what they created, the Job
// controller runs batch workloads, and the resourceclaim controller creates the claims of
// pods that name a ResourceClaimTemplate (Dynamic Resource Allocation). The node
// lifecycle controller is deliberately absent: the node agent owns Node health.
func (c *ControlPlane) startControllers(ctx context.Context) error {
	clientFor := func(name string) (kubernetes.Interface, *rest.Config, error) {
		cfg := rest.AddUserAgent(rest.CopyConfig(c.Config), name)
		cl, err := kubernetes.NewForConfig(cfg)
		return cl, cfg, err
	}
	infClient, _, err := clientFor("sandbox-controller-informers")
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(infClient, 0)

	rsClient, _, err := clientFor("replicaset-controller")
	if err != nil {
		return err
	}
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), rsClient, replicaset.BurstReplicas)

	dClient, _, err := clientFor("deployment-controller")
	if err != nil {
		return err
	}
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), dClient)
	if err != nil {
		return err
	}

	dsClient, _, err := clientFor("daemon-set-controller")
	if err != nil {
		return err
	}
	dsc, err := daemon.NewDaemonSetsController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), dsClient, flowcontrol.NewBackOff(time.Second, 15*time.Minute))
	if err != nil {
		return err
	}

	pdbClient, pdbCfg, err := clientFor("disruption-controller")
	if err != nil {
		return err
	}
	discovery := cacheddiscovery.NewMemCacheClient(pdbClient.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(discovery)
	scaleClient, err := scale.NewForConfig(pdbCfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(pdbClient.Discovery()))
	if err != nil {
		return err
	}
	pdbc := disruption.NewDisruptionController(ctx, factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(), factory.Apps().V1().Deployments(),
		factory.Apps().V1().StatefulSets(), pdbClient, mapper, scaleClient, pdbClient.Discovery())

	gcClient, gcCfg, err := clientFor("generic-garbage-collector")
	if err != nil {
		return err
	}
	metaClient, err := metadata.NewForConfig(gcCfg)
	if err != nil {
		return err
	}
	metaFactory := metadatainformer.NewSharedInformerFactory(metaClient, 0)
	started := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, gcClient, metaClient, mapper, garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(factory, metaFactory), started)
	if err != nil {
		return err
	}

	nsClient, nsCfg, err := clientFor("namespace-controller")
	if err != nil {
		return err
	}
	nsMeta, err := metadata.NewForConfig(nsCfg)
	if err != nil {
		return err
	}
	nsc := namespace.NewNamespaceController(ctx, nsClient, nsMeta, nsClient.Discovery().ServerPreferredNamespacedResources,
		factory.Core().V1().Namespaces(), 5*time.Minute, apiv1.FinalizerKubernetes)

	jobClient, _, err := clientFor("job-controller")
	if err != nil {
		return err
	}
	// Workloads and PodGroups (the WorkloadWithJob and GenericWorkload gates) are off by
	// default: their informers stay unused and unstarted.
	jc, err := job.NewController(ctx, jobClient, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		return err
	}

	claimClient, _, err := clientFor("resource-claim-controller")
	if err != nil {
		return err
	}
	rcc, err := resourceclaim.NewController(klog.FromContext(ctx), claimClient, factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(), factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	close(started)

	run := func(f func()) {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); f() }()
	}
	run(func() { rsc.Run(ctx, 5) })
	run(func() { dc.Run(ctx, 5) })
	run(func() { dsc.Run(ctx, 2) })
	run(func() { pdbc.Run(ctx, 1) })
	run(func() { nsc.Run(ctx, 2) })
	run(func() { jc.Run(ctx, 2) })
	run(func() { rcc.Run(ctx, 2) })
	const gcSync = 30 * time.Second
	run(func() { wait.Until(mapper.Reset, gcSync, ctx.Done()) })
	run(func() { gc.Run(ctx, 5, gcSync) })
	run(func() { gc.Sync(ctx, gcClient.Discovery(), gcSync) })

	factory.WaitForCacheSync(ctx.Done())
	metaFactory.WaitForCacheSync(ctx.Done())
	return nil
}
