// Package core runs the autoscaler: one iteration (RunOnce) refreshes the
// cloud, snapshots the cluster from informer caches, updates the cluster
// state, gives up on nodes that never came, scales up for pending pods,
// scales down unneeded nodes and publishes status; Run repeats it every
// scan interval and when new pods become unschedulable.
//
// core is the top of the flow: only main imports it. It drives core/scaleup,
// core/scaledown, clusterstate and the expanders, which never import it.
package core

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/consolidation"
	"github.com/doks-autoscaler/cluster-autoscaler/core/pending"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/planner"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/expander/factory"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
)

// apiTimeout bounds the autoscaler's own Kubernetes writes (status, taints).
const apiTimeout = 30 * time.Second

// exitWait bounds the wait for node removals at exit and exitAPITimeout the
// status ConfigMap's deletion: together inside the pod's default 30 s
// termination grace period, so the Lease is released before SIGKILL.
const (
	exitWait       = 20 * time.Second
	exitAPITimeout = 5 * time.Second
)

// CloudCallGrace is how long cloud calls may go on after the shutdown
// signal (the wait for removals in flight); main then has the provider
// cancel them (Cleanup), so a retrying call never outlives the pod's grace.
const CloudCallGrace = exitWait

// Autoscaler is the autoscaling loop.
type Autoscaler struct {
	opts config.AutoscalingOptions
	kube kubernetes.Interface
	// status writes the status ConfigMap.
	status   statusWriter
	provider cloudprovider.CloudProvider
	recorder record.EventRecorder
	health   *metrics.HealthCheck

	// cache is what the autoscaler reads of the API server.
	cache clusterCache

	checker   *simulator.PredicateChecker
	snapshot  *simulator.ClusterSnapshot
	sync      *snapshotSync
	registry  *clusterstate.Registry
	taints    clusterstate.TaintConfig
	scaleUp   *scaleup.Orchestrator
	scaleDown *scaledown.ScaleDown
	// The scale-down's parts, which core reads too: the unneeded nodes, the
	// removals in flight, and the actuator to wait for at exit.
	planner  *planner.Planner
	removals *deletiontracker.Tracker
	actuator *actuation.Actuator
	trigger  *Trigger
	// capacity: the capacity APIs (ProvisioningRequests, CapacityBuffers)
	// and the pod list processors that turn them into pods.
	capacity capacityRequests
	// report records what the executors did: events, metrics, registry
	// updates and health.
	report *report.Reporter

	lastScaleUp time.Time
	acted       bool // the last iteration changed the cluster
	// nextScaleDownAt: when the next unneeded node reaches its unneeded
	// time; the loop wakes then rather than up to a scan interval later.
	nextScaleDownAt time.Time
	// newPodsAt: when the oldest of very new pods that made a loop wait
	// (allPodsNew) is old enough for their scale-up; zero when none waits.
	newPodsAt time.Time
	// groupDeletions: the created groups deleted, and refusals backed off.
	groupDeletions groupDeletions
	// consolidation: consolidation's phase (nil until first used).
	consolidation *consolidation.Phase
}

// NewAutoscaler wires informers (nodes, pods, PDBs, DaemonSets, ConfigMaps in
// opts.Namespace for the priority expander), the provider, the simulator,
// clusterstate, expanders and the status writer. statusKube, when not nil,
// is the client the status ConfigMap is written with: one of its own, so
// that the loop's one write is not paced by kube's QPS limiter, which the
// soft taints, drains and deletions spend.
func NewAutoscaler(opts config.AutoscalingOptions, kube, statusKube kubernetes.Interface, provider cloudprovider.CloudProvider,
	recorder record.EventRecorder, health *metrics.HealthCheck) (*Autoscaler, error) {
	a, err := newAutoscaler(opts, kube, provider, recorder, health, clock.RealClock{})
	if err == nil && statusKube != nil {
		a.status.kube = statusKube
	}
	return a, err
}

func newAutoscaler(opts config.AutoscalingOptions, kube kubernetes.Interface, provider cloudprovider.CloudProvider,
	recorder record.EventRecorder, health *metrics.HealthCheck, clk clock.Clock, actuatorOptions ...actuation.Option) (*Autoscaler, error) {
	if kube == nil || provider == nil {
		return nil, fmt.Errorf("core: a Kubernetes client and a cloud provider are required")
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	a := &Autoscaler{opts: opts, kube: kube, provider: provider, recorder: recorder, health: health, groupDeletions: newGroupDeletions(),
		status: statusWriter{kube: kube, namespace: opts.Namespace, name: opts.StatusConfigMapName}}

	var err error
	if a.cache, err = newClusterCache(kube, opts); err != nil {
		return nil, err
	}
	podInf := a.cache.factory.Core().V1().Pods()

	a.trigger = NewTrigger(clk, opts.TriggerIdleWindow, opts.TriggerMaxWindow, opts.FrequentLoopsEnabled)
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if p, ok := obj.(*apiv1.Pod); ok && a.wantsNode(p) {
				a.trigger.Notify()
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*apiv1.Pod)
			n, ok2 := newObj.(*apiv1.Pod)
			// Only the transition counts: the scheduler rewrites the condition
			// of a pod it keeps failing to place.
			if ok1 && ok2 && a.wantsNode(n) && !a.wantsNode(o) {
				a.trigger.Notify()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("core: pod event handler: %w", err)
	}

	// With the factory, the volume plugins (PVCs, PVs, storage classes,
	// CSI limits) take part in the simulation; they register their informers
	// on it now and start with the others in Run.
	var checkerOpts []simulator.CheckerOption
	if opts.SchedulerConfigFile != "" {
		profile, err := simulator.LoadSchedulerProfile(opts.SchedulerConfigFile)
		if err != nil {
			return nil, fmt.Errorf("core: --scheduler-config-file: %w", err)
		}
		checkerOpts = append(checkerOpts, simulator.WithSchedulerProfile(profile))
	}
	checker, err := simulator.NewPredicateCheckerWithInformers(a.cache.factory, checkerOpts...)
	if err != nil {
		return nil, fmt.Errorf("core: scheduler framework: %w", err)
	}
	a.checker = checker
	a.snapshot = simulator.NewClusterSnapshot()
	a.sync = newSnapshotSync(a.snapshot)
	a.taints = clusterstate.NewTaintConfig(opts)
	if err := a.newDecisionState(actuatorOptions...); err != nil {
		return nil, err
	}
	// A provider whose templates depend on the cluster's DRA drivers reads
	// them from these informers (started with the others in Run).
	if p, ok := provider.(cloudprovider.DRAAware); ok {
		p.SetDRAListers(cloudprovider.DRAListers{DeviceClasses: a.cache.deviceClasses, ResourceSlices: a.cache.resourceSlices})
	}
	return a, nil
}

// newDecisionState builds what remembers decisions from one iteration to
// the next: the cluster state registry, the scale-up orchestrator and the
// scale-down planner and actuator.
func (a *Autoscaler) newDecisionState(actuatorOptions ...actuation.Option) error {
	a.registry = clusterstate.NewRegistry(a.provider, a.opts)
	a.report = report.New(report.Deps{Provider: a.provider, Registry: a.registry, Events: a.recorder,
		Health: a.health, Status: statusConfigMapRef(a.opts)})
	a.status.recorder = a.report
	cms := a.cache.nsFactory.Core().V1().ConfigMaps().Lister().ConfigMaps(a.opts.Namespace)
	strategy, err := factory.Build(a.opts.ExpanderNames, a.provider, cms, a.report, nil, nil)
	if err != nil {
		return fmt.Errorf("core: --expander: %w", err)
	}
	a.scaleUp = scaleup.New(a.opts, a.provider, a.registry, strategy, a.checker, a.report)
	// The drain rules, one set for the planner and the actuator's final
	// check.
	drainOpts := drain.NewOptions(a.opts, a.controllerReplicas)
	a.planner = planner.New(a.opts, a.provider, a.registry, a.checker, drainOpts)
	// The end of each removal frees its budget: the loop may start the
	// next one without waiting for the scan interval.
	a.removals = deletiontracker.New(func(string, string, deletiontracker.Outcome) { a.trigger.Kick() })
	a.actuator = actuation.New(a.opts, actuation.Deps{
		Kube: a.kube, Provider: a.provider, Outcomes: a.report,
		DrainOptions: drainOpts, PDBs: a.listPDBs, Removals: a.removals, Nodes: a.cache.nodes, Pods: a.cache.pods,
		GroupGone: func(g cloudprovider.NodeGroup) { a.deleteNodeGroup(g, time.Now()) },
	}, actuatorOptions...)
	a.scaleDown = scaledown.New(a.opts, a.registry, a.planner, a.actuator, a.removals)
	// Cooldowns start from the removals' ends.
	a.removals.AddListener(a.scaleDown.RemovalEnded)
	return nil
}

// AddPodListProcessor adds p to the processors scale-up runs on the pending
// pods, after those added before. Call it before Run.
func (a *Autoscaler) AddPodListProcessor(p fakepods.PodListProcessor) {
	a.capacity.processors = append(a.capacity.processors, p)
}

// Informers is the shared informer factory of the autoscaler's caches, which
// Run starts: components built beside the core (the CapacityBuffer
// controller) take their listers from it instead of watching the same
// objects twice. Register informers before Run.
func (a *Autoscaler) Informers() informers.SharedInformerFactory { return a.cache.factory }

// NotifyCapacityChange wakes the loop as a new unschedulable pod does (after
// the same batching window): a capacity object asks for room.
func (a *Autoscaler) NotifyCapacityChange() { a.trigger.Notify() }

// wantsNode tells a pod that may need a new node: unschedulable, and not
// waiting for preemption on a node it was nominated for (that one needs no
// iteration at once; it causes no scale-up).
func (a *Autoscaler) wantsNode(p *apiv1.Pod) bool {
	return pending.IsUnschedulable(p) && !pending.WaitsForPreemption(p, a.nodeExists)
}

func (a *Autoscaler) nodeExists(name string) bool {
	_, err := a.cache.nodes.Get(name)
	return err == nil
}

// listPDBs lists the PodDisruptionBudgets in the cache.
func (a *Autoscaler) listPDBs() ([]*policyv1.PodDisruptionBudget, error) {
	return a.cache.pdbs.List(labels.Everything())
}

// controllerReplicas looks up a pod's controller in the caches: whether it
// still exists (same UID) and how many replicas it wants.
func (a *Autoscaler) controllerReplicas(ns string, ref metav1.OwnerReference) (int32, bool) {
	var (
		uid      types.UID
		replicas *int32
		err      error
	)
	switch ref.Kind {
	case "ReplicaSet":
		var o *appsv1.ReplicaSet
		if o, err = a.cache.rss.ReplicaSets(ns).Get(ref.Name); err == nil {
			uid, replicas = o.UID, o.Spec.Replicas
		}
	case "StatefulSet":
		var o *appsv1.StatefulSet
		if o, err = a.cache.sss.StatefulSets(ns).Get(ref.Name); err == nil {
			uid, replicas = o.UID, o.Spec.Replicas
		}
	case "ReplicationController":
		var o *apiv1.ReplicationController
		if o, err = a.cache.rcs.ReplicationControllers(ns).Get(ref.Name); err == nil {
			uid, replicas = o.UID, o.Spec.Replicas
		}
	case "Job":
		var o *batchv1.Job
		if o, err = a.cache.jobs.Jobs(ns).Get(ref.Name); err == nil {
			uid, replicas = o.UID, o.Spec.Parallelism
		}
	default:
		return 0, true
	}
	if err != nil || (ref.UID != "" && uid != ref.UID) {
		return 0, false
	}
	if replicas == nil {
		return 1, true // the API's default
	}
	return *replicas, true
}

// startInformers starts the caches and waits for them; false if ctx ended
// first.
func (a *Autoscaler) startInformers(ctx context.Context) bool {
	a.cache.factory.Start(ctx.Done())
	a.cache.nsFactory.Start(ctx.Done())
	for typ, ok := range a.cache.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			klog.ErrorS(nil, "Informer cache did not sync", "type", typ.String())
			return false
		}
	}
	for typ, ok := range a.cache.nsFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			klog.ErrorS(nil, "Informer cache did not sync", "type", typ.String())
			return false
		}
	}
	return true
}

// Run starts the informers, waits for their sync, removes
// ToBeDeletedByClusterAutoscaler taints left by an earlier run, writes the
// Initializing status, then runs RunOnce every opts.ScanInterval and when the
// pending-pod trigger fires, until ctx ends.
func (a *Autoscaler) Run(ctx context.Context) error {
	klog.InfoS("Waiting for informer caches (nodes, pods, PodDisruptionBudgets, DaemonSets, controllers, storage, DRA objects, ConfigMaps in the namespace)",
		"namespace", a.opts.Namespace, "dra", a.opts.DynamicResourceAllocationEnabled)
	// The provider's first refresh (its pools and their templates) needs no
	// cache: it runs while the caches sync, which at thousands of nodes
	// take seconds.
	refreshed := make(chan error, 1)
	go func() { refreshed <- a.provider.Refresh() }()
	synced := a.startInformers(ctx)
	// Waited for whatever follows, even a return: no other refresh of the
	// provider may run beside it.
	refreshErr := <-refreshed
	if !synced {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("core: informer caches did not sync")
	}
	// The provider is asked first which instances it is deleting or no
	// longer has (a new leader may take over during a delete): their
	// taints stay. If it cannot say, no taint is removed; the next restart
	// tries again.
	nodes, err := a.cache.nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Start-up: stale taint clean-up skipped: the node cache cannot be listed")
		a.report.Error(report.InternalError(err))
	} else if err := refreshErr; err != nil {
		klog.ErrorS(err, "Start-up: stale taint clean-up skipped: the cloud provider cannot list its instances, so nodes it may be deleting are unknown")
		a.report.Error(report.CloudProviderError(err))
	} else if err := actuation.CleanUpStaleTaints(ctx, a.kube, nodes, actuation.LeavingInstances(a.provider, nodes), a.opts.MaxBulkSoftTaintCount != 0); err != nil {
		// Not fatal: the nodes stay tainted, which an operator can see, and
		// the next restart tries again.
		klog.ErrorS(err, "Start-up: stale taint clean-up incomplete")
		a.report.Error(report.APICallError(err))
	}
	if a.opts.WriteStatusConfigMap {
		if err := a.status.write(ctx, clusterstate.InitializingStatus(time.Now(), "")); err != nil {
			klog.ErrorS(err, "Start-up: writing the Initializing status failed")
		}
	}
	klog.InfoS("Autoscaler running", "scanInterval", a.opts.ScanInterval, "frequentLoops", a.opts.FrequentLoopsEnabled,
		"idleWindow", a.opts.TriggerIdleWindow, "maxWindow", a.opts.TriggerMaxWindow, "expanders", a.opts.ExpanderNames)
	for {
		if ctx.Err() != nil {
			return nil
		}
		if err := a.RunOnce(ctx, time.Now()); err != nil {
			klog.ErrorS(err, "Iteration failed")
		}
		waitStart := time.Now()
		reason := a.trigger.Wait(ctx, a.waitInterval(time.Now()), a.acted)
		a.report.Took(metrics.LoopWait, waitStart)
		if reason == WakeDone {
			return nil
		}
		klog.V(4).InfoS("Starting iteration", "reason", reason)
	}
}

// waitInterval is the scan interval, shortened to wake when the next
// unneeded node reaches its unneeded time (not with
// --frequent-loops-enabled=false).
func (a *Autoscaler) waitInterval(now time.Time) time.Duration {
	interval := a.opts.ScanInterval
	if a.opts.FrequentLoopsEnabled && !a.nextScaleDownAt.IsZero() {
		if d := a.nextScaleDownAt.Sub(now); d < interval {
			interval = max(d, minWait)
		}
	}
	// Pods that waited for the rest of their burst are acted on as soon as
	// they are old enough, not a scan interval later.
	if !a.newPodsAt.IsZero() {
		if d := a.newPodsAt.Sub(now); d < interval {
			interval = max(d, minWait)
		}
	}
	return interval
}

// minWait is the shortest wait between iterations.
const minWait = 100 * time.Millisecond

// ExitCleanUp deletes the status ConfigMap (when written) and calls
// provider.Cleanup.
func (a *Autoscaler) ExitCleanUp() {
	// Removals in flight finish (a DigitalOcean deletion) or give their node
	// back before the Lease is released: the next leader clears leftover
	// taints at start-up, and must not clear one from a node being deleted.
	done := make(chan struct{})
	go func() { a.actuator.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(exitWait):
		klog.InfoS("Exit: node removals still running; leaving them", "after", exitWait)
	}
	if a.opts.WriteStatusConfigMap {
		if err := a.status.remove(); err != nil {
			klog.ErrorS(err, "Exit: deleting the status ConfigMap failed")
		}
	}
	a.capacity.processors.CleanUp()
	if err := a.provider.Cleanup(); err != nil {
		klog.ErrorS(err, "Exit: provider clean-up failed")
	}
}
