// Package nodeagent plays the part of every kubelet and of the cloud-controller-manager in
// the sandbox: it registers a Node for each running droplet of the DOKS simulator, keeps
// its heartbeat, marks bound pods Running, finalises deleted pods, and removes the Node
// (and its pods) when the droplet goes away.
package nodeagent

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Labels DOKS puts on its nodes.
const (
	LabelNodeID     = "doks.digitalocean.com/node-id"
	LabelNodePool   = "doks.digitalocean.com/node-pool"
	LabelNodePoolID = "doks.digitalocean.com/node-pool-id"
	LabelGPUBrand   = "doks.digitalocean.com/gpu-brand"
	// ProviderIDPrefix precedes the droplet ID in spec.providerID.
	ProviderIDPrefix = "digitalocean://"
	// KubeletVersion is what the simulated nodes report.
	KubeletVersion = "v1.37.2"
)

// apiWorkers bounds the API calls the agent makes at once when many nodes
// register or heartbeat together (the control plane's client allows 500 per
// second).
const apiWorkers = 16

// Options configures an Agent.
type Options struct {
	// Region fills the region labels; doks.DefaultRegion when empty.
	Region string
	// HeartbeatInterval is how often node Leases are renewed; default 10s.
	HeartbeatInterval time.Duration
	// StatusReportInterval is how often an unchanged Node's status is posted again (its
	// Ready condition's heartbeat time); default 5m, the kubelet's default
	// nodeStatusReportFrequency. The Lease is what says a node is alive; a status posted
	// more often than a kubelet posts it gives every watcher of Nodes (the autoscaler
	// included) events a real cluster does not send.
	StatusReportInterval time.Duration
	// ResyncInterval re-reads the simulator even without a change signal; default 2s.
	ResyncInterval time.Duration
	// RegisterDelay is how long a droplet stays running before its Node appears (the
	// kubelet's start-up); default 0.
	RegisterDelay time.Duration
	// TerminationDelay is how long a pod being deleted lingers before the agent finalises it
	// (a kubelet stopping containers); capped by the pod's grace period; default 0.
	TerminationDelay time.Duration
	// DRADrivers are the GPU DRA drivers the cluster runs (gpudriver.NVIDIA, gpudriver.AMD),
	// as DOKS's nvidia_gpu_dra_driver / amd_gpu_dra_driver add-ons install them. A GPU node
	// of such a driver's vendor advertises no nvidia.com/gpu or amd.com/gpu (the add-on
	// replaces the device plugin) and gets the ResourceSlice the driver publishes. GPU nodes
	// of other vendors keep the device plugin's extended resource.
	DRADrivers []string
	// SliceDelay is how long a GPU node is Ready before its driver publishes its slice (the
	// driver's DaemonSet starting); default 0.
	SliceDelay time.Duration
}

// Agent connects a doks.Server to a cluster. Start it once; Stop ends it.
type Agent struct {
	kube kubernetes.Interface
	sim  *doks.Server
	opts Options

	mu            sync.Mutex
	neverRegister map[string]bool      // pool names whose new nodes never register
	runningSince  map[string]time.Time // DOKS node ID → first seen running
	nodeIndex     map[string]int       // Node name → small integer for IPs
	nextIndex     int
	podIPSeq      map[string]int          // Node name → last pod IP host part
	registered    map[string]time.Time    // Node name → registration time
	managed       map[string]managedRef   // Node name → DOKS identity
	terminating   map[types.UID]time.Time // pods being deleted → first seen so
	holdSlices    map[string]bool         // pool names whose GPU nodes publish no slice yet
	sliced        map[string]bool         // Node names whose slice is published

	factory    informers.SharedInformerFactory
	nodeLister corelisters.NodeLister
	podLister  corelisters.PodLister
	podQueue   workqueue.TypedRateLimitingInterface[string]

	kick   chan struct{} // a reconcile pass is wanted (slices released or due)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type managedRef struct{ poolName, nodeID string }

// New returns an agent; nothing runs until Start.
func New(kube kubernetes.Interface, sim *doks.Server, opts Options) *Agent {
	if opts.Region == "" {
		opts.Region = doks.DefaultRegion
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.StatusReportInterval <= 0 {
		opts.StatusReportInterval = 5 * time.Minute
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = 2 * time.Second
	}
	return &Agent{
		kube: kube, sim: sim, opts: opts,
		neverRegister: map[string]bool{},
		runningSince:  map[string]time.Time{},
		nodeIndex:     map[string]int{},
		podIPSeq:      map[string]int{},
		registered:    map[string]time.Time{},
		managed:       map[string]managedRef{},
		terminating:   map[types.UID]time.Time{},
		kick:          make(chan struct{}, 1),
		holdSlices:    map[string]bool{},
		sliced:        map[string]bool{},
	}
}

// NeverRegister makes droplets of the pool that have no Node yet never get one: the
// droplet runs but its kubelet never joins, as when a node fails to boot.
func (a *Agent) NeverRegister(poolName string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.neverRegister[poolName] = true
	klog.Infof("node agent: new nodes of pool %s will never register", poolName)
}

// AllowRegister undoes NeverRegister.
func (a *Agent) AllowRegister(poolName string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.neverRegister, poolName)
	klog.Infof("node agent: nodes of pool %s register again", poolName)
}

// HoldSlices keeps the DRA driver of the pool's GPU nodes from publishing their
// ResourceSlices: the nodes are Ready, their devices not yet known, as while the driver's
// pod starts.
func (a *Agent) HoldSlices(poolName string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holdSlices[poolName] = true
	klog.Infof("node agent: GPU nodes of pool %s publish no ResourceSlice until released", poolName)
}

// ReleaseSlices undoes HoldSlices: the slices appear on the next pass.
func (a *Agent) ReleaseSlices(poolName string) {
	a.mu.Lock()
	delete(a.holdSlices, poolName)
	a.mu.Unlock()
	klog.Infof("node agent: GPU nodes of pool %s publish their ResourceSlices", poolName)
	a.kickNow()
}

// kickNow asks the reconcile loop for a pass now.
func (a *Agent) kickNow() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// SetTerminationDelay changes Options.TerminationDelay for pods deleted from now on.
func (a *Agent) SetTerminationDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opts.TerminationDelay = d
}

// Start runs the agent until Stop. It returns once its informers have synced and the
// first reconciliation pass is done.
func (a *Agent) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.factory = informers.NewSharedInformerFactory(a.kube, 0)
	a.nodeLister = a.factory.Core().V1().Nodes().Lister()
	podInformer := a.factory.Core().V1().Pods()
	a.podLister = podInformer.Lister()
	// Per pod back-off only: every kubelet retries its own pods, so one 10-per-second
	// bucket shared by all nodes (the controllers' default limiter) is not what a
	// cluster has.
	a.podQueue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "sandbox-node-agent-pods"})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			a.podQueue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		cancel()
		return err
	}
	// A pod bound before its Node reached the agent's cache is retried when the Node shows up.
	if _, err := a.factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*apiv1.Node); ok {
				a.enqueuePodsOn(n.Name)
			}
		},
	}); err != nil {
		cancel()
		return err
	}
	a.factory.Start(ctx.Done())
	for typ, ok := range a.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return fmt.Errorf("node agent: %v informer did not sync", typ)
		}
	}
	a.adoptExisting(ctx)
	a.reconcile(ctx)

	changes, unsubscribe := a.sim.Subscribe()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer unsubscribe()
		tick := time.NewTicker(a.opts.ResyncInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
			case <-a.kick:
			case <-tick.C:
			}
			a.reconcile(ctx)
		}
	}()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		tick := time.NewTicker(a.opts.HeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				a.heartbeat(ctx)
			}
		}
	}()
	// As many pods start at once as nodes register: thousands of kubelets each start
	// their own.
	for i := 0; i < apiWorkers; i++ {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for a.processPod(ctx) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		a.podQueue.ShutDown()
	}()
	klog.Infof("node agent started (region %s, heartbeat every %v)", a.opts.Region, a.opts.HeartbeatInterval)
	return nil
}

// Stop ends the agent's goroutines; Nodes and pods stay as they are.
func (a *Agent) Stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.wg.Wait()
	a.factory.Shutdown()
}

// adoptExisting takes over Nodes a previous agent registered (e.g. after a restart).
func (a *Agent) adoptExisting(ctx context.Context) {
	nodes, _ := a.nodeLister.List(labels.Everything())
	var slices []resourceapi.ResourceSlice
	if len(a.opts.DRADrivers) > 0 {
		l, err := a.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.Warningf("node agent: listing ResourceSlices to adopt: %v", err)
		} else {
			slices = l.Items
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range slices {
		if s.Spec.NodeName != nil {
			a.sliced[*s.Spec.NodeName] = true
		}
	}
	for _, n := range nodes {
		if id := n.Labels[LabelNodeID]; id != "" {
			a.managed[n.Name] = managedRef{poolName: n.Labels[LabelNodePool], nodeID: id}
			a.registered[n.Name] = n.CreationTimestamp.Time
			a.indexLocked(n.Name)
		}
	}
}

// reconcile makes the Nodes match the simulator's droplets.
func (a *Agent) reconcile(ctx context.Context) {
	pools := a.sim.Pools()
	now := time.Now()
	alive := map[string]bool{} // Node names whose droplet still exists
	type create struct {
		pool godo.KubernetesNodePool
		node *godo.KubernetesNode
	}
	var toCreate []create
	var toCordon []string

	a.mu.Lock()
	seenRunning := map[string]bool{}
	for _, p := range pools {
		for _, n := range p.Nodes {
			alive[n.Name] = true
			state := ""
			if n.Status != nil {
				state = n.Status.State
			}
			_, exists := a.managed[n.Name]
			switch state {
			case doks.StateRunning:
				seenRunning[n.ID] = true
				if _, ok := a.runningSince[n.ID]; !ok {
					a.runningSince[n.ID] = now
				}
				if exists || a.neverRegister[p.Name] {
					continue
				}
				if now.Sub(a.runningSince[n.ID]) >= a.opts.RegisterDelay {
					toCreate = append(toCreate, create{pool: p, node: n})
				}
			case doks.StateDraining, doks.StateDeleting:
				if exists {
					toCordon = append(toCordon, n.Name)
				}
			}
		}
	}
	for id := range a.runningSince {
		if !seenRunning[id] {
			delete(a.runningSince, id)
		}
	}
	var toDelete []string
	for name := range a.managed {
		if !alive[name] {
			toDelete = append(toDelete, name)
		}
	}
	a.mu.Unlock()

	// Kubelets join at once, not one after another: each registration is
	// four API calls, so serially a 5,000-node pool took longer to appear
	// than the scenario could wait.
	workqueue.ParallelizeUntil(ctx, apiWorkers, len(toCreate), func(i int) {
		c := toCreate[i]
		if err := a.register(ctx, c.pool, c.node); err != nil {
			klog.Errorf("node agent: registering node %s of pool %s: %v", c.node.Name, c.pool.Name, err)
		}
	})
	for _, name := range toCordon {
		a.cordon(ctx, name)
	}
	sort.Strings(toDelete)
	for _, name := range toDelete {
		a.removeNode(ctx, name)
	}
	a.publishSlices(ctx, pools)
}

func (a *Agent) indexLocked(name string) int {
	if i, ok := a.nodeIndex[name]; ok {
		return i
	}
	a.nextIndex++
	a.nodeIndex[name] = a.nextIndex
	return a.nextIndex
}

// nodeIP gives node number i a stable 10.10.x.y address.
func nodeIP(i int) string { return fmt.Sprintf("10.10.%d.%d", (i/250)%250, i%250+1) }

// buildNode is the Node a DOKS kubelet would register for droplet n of pool p.
func (a *Agent) buildNode(p godo.KubernetesNodePool, n *godo.KubernetesNode, index int) (*apiv1.Node, error) {
	capacity, allocatable, ok := doks.SizeResources(p.Size)
	if !ok {
		return nil, fmt.Errorf("unknown droplet size %q", p.Size)
	}
	labels := map[string]string{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	for k, v := range map[string]string{
		LabelNodeID:                        n.ID,
		LabelNodePool:                      p.Name,
		LabelNodePoolID:                    p.ID,
		apiv1.LabelHostname:                n.Name,
		apiv1.LabelOSStable:                "linux",
		apiv1.LabelArchStable:              "amd64",
		apiv1.LabelInstanceTypeStable:      p.Size,
		apiv1.LabelTopologyRegion:          a.opts.Region,
		apiv1.LabelFailureDomainBetaRegion: a.opts.Region,
	} {
		labels[k] = v
	}
	if vendor, _, count := doks.SizeGPU(p.Size); count > 0 {
		labels[LabelGPUBrand] = vendor
		if a.draDriver(p.Size) != "" {
			// The DRA driver add-on replaces the device plugin: no extended resource.
			for res := range capacity {
				if strings.HasSuffix(string(res), "/gpu") {
					delete(capacity, res)
					delete(allocatable, res)
				}
			}
		}
	}
	var taints []apiv1.Taint
	for _, t := range p.Taints {
		taints = append(taints, apiv1.Taint{Key: t.Key, Value: t.Value, Effect: apiv1.TaintEffect(t.Effect)})
	}
	now := metav1.Now()
	cond := func(t apiv1.NodeConditionType, s apiv1.ConditionStatus, reason, msg string) apiv1.NodeCondition {
		return apiv1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	ip := nodeIP(index)
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Spec:       apiv1.NodeSpec{ProviderID: ProviderIDPrefix + n.DropletID, Taints: taints},
		Status: apiv1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       apiv1.NodeRunning,
			Conditions: []apiv1.NodeCondition{
				cond(apiv1.NodeMemoryPressure, apiv1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(apiv1.NodeDiskPressure, apiv1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(apiv1.NodePIDPressure, apiv1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(apiv1.NodeReady, apiv1.ConditionTrue, "KubeletReady", "kubelet is posting ready status (sandbox node agent)"),
			},
			Addresses: []apiv1.NodeAddress{{Type: apiv1.NodeInternalIP, Address: ip}, {Type: apiv1.NodeHostName, Address: n.Name}},
			NodeInfo: apiv1.NodeSystemInfo{
				MachineID: n.ID, SystemUUID: n.ID, BootID: n.ID,
				KernelVersion: "6.1.0-sandbox", OSImage: "Debian GNU/Linux 12 (bookworm)",
				ContainerRuntimeVersion: "containerd://sandbox", KubeletVersion: KubeletVersion,
				OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}, nil
}

func (a *Agent) register(ctx context.Context, p godo.KubernetesNodePool, n *godo.KubernetesNode) error {
	a.mu.Lock()
	index := a.indexLocked(n.Name)
	a.mu.Unlock()
	node, err := a.buildNode(p, n, index)
	if err != nil {
		return err
	}
	status := node.Status
	// Managed from the moment the Node exists: the scheduler may bind pods to it before
	// this function returns, and those must be started too.
	a.mu.Lock()
	a.managed[n.Name] = managedRef{poolName: p.Name, nodeID: n.ID}
	a.mu.Unlock()
	created, err := a.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = a.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		a.mu.Lock()
		delete(a.managed, n.Name)
		a.mu.Unlock()
		return err
	}
	// Status on create is not guaranteed to stick; set it through the subresource as a
	// kubelet's first status update would.
	created.Status = status
	if _, err := a.kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		// Start over on the next pass rather than leave a Node without status.
		_ = a.kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		a.mu.Lock()
		delete(a.managed, n.Name)
		a.mu.Unlock()
		return fmt.Errorf("status: %w", err)
	}
	if err := a.renewLease(ctx, created); err != nil {
		klog.Warningf("node agent: lease for %s: %v", n.Name, err)
	}
	a.mu.Lock()
	a.registered[n.Name] = time.Now()
	a.mu.Unlock()
	a.enqueuePodsOn(n.Name)
	if a.draDriver(p.Size) != "" {
		// The reconcile pass after the delay publishes the slice.
		time.AfterFunc(a.opts.SliceDelay, a.kickNow)
	}
	klog.Infof("node agent: registered node %s (pool %s, droplet %s, size %s)", n.Name, p.Name, n.DropletID, p.Size)
	return nil
}

func (a *Agent) renewLease(ctx context.Context, node *apiv1.Node) error {
	leases := a.kube.CoordinationV1().Leases(apiv1.NamespaceNodeLease)
	now := metav1.NowMicro()
	l, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name, Namespace: apiv1.NamespaceNodeLease,
				// As the kubelet does: the Lease goes when its Node goes.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now,
			},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the Lease of every managed Node and refreshes the Ready condition's
// heartbeat time every StatusReportInterval, as a kubelet does when nothing changes.
func (a *Agent) heartbeat(ctx context.Context) {
	a.mu.Lock()
	names := make([]string, 0, len(a.managed))
	for name := range a.managed {
		names = append(names, name)
	}
	a.mu.Unlock()
	// In parallel, as every kubelet renews its own: serially, thousands of
	// nodes would not all be renewed within one interval.
	workqueue.ParallelizeUntil(ctx, apiWorkers, len(names), func(i int) {
		node, err := a.nodeLister.Get(names[i])
		if err != nil {
			return
		}
		if err := a.renewLease(ctx, node); err != nil && ctx.Err() == nil {
			klog.V(2).Infof("node agent: renewing lease of %s: %v", names[i], err)
		}
		a.touchReady(ctx, node)
	})
}

func (a *Agent) touchReady(ctx context.Context, node *apiv1.Node) {
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady && !reportDue(node.Name, c.LastHeartbeatTime.Time, time.Now(), a.opts.StatusReportInterval) {
			return
		}
	}
	n := node.DeepCopy()
	now := metav1.Now()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = now
	}
	if _, err := a.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		klog.V(2).Infof("node agent: node status heartbeat of %s: %v", n.Name, err)
	}
}

// reportDue tells whether a node whose status was last posted at last posts it again at
// now: once per interval, at a phase of its own (from its name). Kubelets started at
// different times post at different times; nodes registered together in the sandbox
// would otherwise all post in the same second, and none in the interval's first
// minutes, which is what a short measurement after they register would see.
func reportDue(name string, last, now time.Time, interval time.Duration) bool {
	h := fnv.New64a()
	h.Write([]byte(name))
	phase := time.Duration(h.Sum64() % uint64(interval))
	slot := func(t time.Time) int64 { return int64(t.Add(phase).Sub(time.Unix(0, 0)) / interval) }
	return slot(now) > slot(last)
}

// cordon marks a node whose droplet is draining or being deleted unschedulable, as DOKS
// does before it drains.
func (a *Agent) cordon(ctx context.Context, name string) {
	node, err := a.nodeLister.Get(name)
	if err != nil || node.Spec.Unschedulable {
		return
	}
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := a.kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if !apierrors.IsNotFound(err) {
			klog.Warningf("node agent: cordoning %s: %v", name, err)
		}
		return
	}
	klog.Infof("node agent: cordoned node %s: its droplet is being removed", name)
}

// removeNode deletes the Node of a droplet that no longer exists, and its pods: no kubelet
// is left to report them.
func (a *Agent) removeNode(ctx context.Context, name string) {
	err := a.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.Errorf("node agent: deleting node %s: %v", name, err)
		return
	}
	pods, err := a.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		klog.Errorf("node agent: listing pods of removed node %s: %v", name, err)
		return
	}
	for _, p := range pods.Items {
		a.forceDelete(ctx, &p)
	}
	_ = a.kube.CoordinationV1().Leases(apiv1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
	a.deleteSlices(ctx, name)
	a.mu.Lock()
	delete(a.managed, name)
	delete(a.registered, name)
	delete(a.podIPSeq, name)
	a.mu.Unlock()
	klog.Infof("node agent: removed node %s and its %d pods: its droplet is gone", name, len(pods.Items))
}

func (a *Agent) forceDelete(ctx context.Context, p *apiv1.Pod) {
	uid := p.UID
	err := a.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.Warningf("node agent: deleting pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func (a *Agent) enqueuePodsOn(nodeName string) {
	pods, err := a.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == nodeName {
			a.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

func (a *Agent) isManaged(nodeName string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.managed[nodeName]
	return ok
}

func (a *Agent) processPod(ctx context.Context) bool {
	key, quit := a.podQueue.Get()
	if quit {
		return false
	}
	defer a.podQueue.Done(key)
	retryAfter, err := a.syncPod(ctx, key)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			klog.V(2).Infof("node agent: pod %s: %v (retrying)", key, err)
		}
		a.podQueue.AddRateLimited(key)
	case retryAfter > 0:
		a.podQueue.Forget(key)
		a.podQueue.AddAfter(key, retryAfter)
	default:
		a.podQueue.Forget(key)
	}
	return true
}

// syncPod plays the kubelet for one pod: start it when bound, finish it when deleted.
func (a *Agent) syncPod(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := a.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pod.DeletionTimestamp != nil {
		if pod.Spec.NodeName != "" && !a.isManaged(pod.Spec.NodeName) {
			return 0, nil
		}
		a.mu.Lock()
		delay := a.opts.TerminationDelay
		a.mu.Unlock()
		if pod.DeletionGracePeriodSeconds != nil {
			if grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second; grace < delay {
				delay = grace
			}
		}
		// deletionTimestamp has one-second precision, too coarse for short delays: time the
		// termination from when the agent first saw it.
		a.mu.Lock()
		since, ok := a.terminating[pod.UID]
		if !ok {
			since = time.Now()
			a.terminating[pod.UID] = since
		}
		a.mu.Unlock()
		if wait := time.Until(since.Add(delay)); wait > 0 {
			return wait, nil
		}
		a.forceDelete(ctx, pod)
		a.mu.Lock()
		delete(a.terminating, pod.UID)
		a.mu.Unlock()
		klog.V(2).Infof("node agent: finalised deleted pod %s", key)
		return 0, nil
	}
	if pod.Spec.NodeName == "" || !a.isManaged(pod.Spec.NodeName) {
		return 0, nil
	}
	if pod.Status.Phase != apiv1.PodPending && pod.Status.Phase != "" {
		return 0, nil
	}
	node, err := a.nodeLister.Get(pod.Spec.NodeName)
	if err != nil {
		return 0, err
	}
	updated := a.runningStatus(pod, node)
	if _, err := a.kube.CoreV1().Pods(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	klog.V(2).Infof("node agent: pod %s running on %s with IP %s", key, node.Name, updated.Status.PodIP)
	return 0, nil
}

func (a *Agent) podIP(nodeName string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.indexLocked(nodeName)
	seq := a.podIPSeq[nodeName]%252 + 1
	a.podIPSeq[nodeName] = seq
	return fmt.Sprintf("10.244.%d.%d", idx%250, seq+1)
}

// runningStatus is the status a kubelet reports once every container of pod has started.
func (a *Agent) runningStatus(pod *apiv1.Pod, node *apiv1.Node) *apiv1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	hostIP := ""
	for _, addr := range node.Status.Addresses {
		if addr.Type == apiv1.NodeInternalIP {
			hostIP = addr.Address
		}
	}
	ip := a.podIP(node.Name)
	if p.Spec.HostNetwork {
		ip = hostIP
	}
	p.Status.Phase = apiv1.PodRunning
	p.Status.HostIP = hostIP
	p.Status.HostIPs = []apiv1.HostIP{{IP: hostIP}}
	p.Status.PodIP = ip
	p.Status.PodIPs = []apiv1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	setCondition(p, apiv1.PodReadyToStartContainers, now)
	setCondition(p, apiv1.PodInitialized, now)
	setCondition(p, apiv1.ContainersReady, now)
	setCondition(p, apiv1.PodReady, now)
	setCondition(p, apiv1.PodScheduled, now)
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, apiv1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "containerd://" + string(p.UID) + "-" + c.Name, Ready: true,
			State: apiv1.ContainerState{Terminated: &apiv1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, apiv1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "containerd://" + string(p.UID) + "-" + c.Name,
			Ready: true, Started: ptr.To(true),
			State: apiv1.ContainerState{Running: &apiv1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return p
}

func setCondition(p *apiv1.Pod, t apiv1.PodConditionType, now metav1.Time) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			if p.Status.Conditions[i].Status != apiv1.ConditionTrue {
				p.Status.Conditions[i].Status = apiv1.ConditionTrue
				p.Status.Conditions[i].LastTransitionTime = now
				p.Status.Conditions[i].Reason = ""
				p.Status.Conditions[i].Message = ""
			}
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, apiv1.PodCondition{Type: t, Status: apiv1.ConditionTrue, LastTransitionTime: now})
}

// Registered reports the Nodes the agent manages, by name, with their registration time.
func (a *Agent) Registered() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]time.Time, len(a.registered))
	for k, v := range a.registered {
		out[k] = v
	}
	return out
}
