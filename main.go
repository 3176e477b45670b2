// Command cluster-autoscaler grows and shrinks DigitalOcean Kubernetes (DOKS)
// node pools to fit the cluster's pods.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	cbclient "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/clientset/versioned"
	prclient "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	provreqv1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/capacitybuffer"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/builder"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/informercache"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/preflight"
	"github.com/doks-autoscaler/cluster-autoscaler/provisioningrequest"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/version"
)

const componentName = "cluster-autoscaler"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the process exit code: 0 after a clean shutdown, 1 when the
// autoscaler cannot start or stops on an error, 2 for bad flags.
func run(args []string) int {
	gc := setGCPercent(os.Getenv) // before the informers fill the heap
	if len(args) > 0 && args[0] == preflight.Command {
		return preflight.Main(args[1:], os.Stdout, os.Stderr) // docs/preflight.md
	}
	opts, code := parseFlags(args)
	if code >= 0 {
		return code
	}
	defer klog.Flush()
	klog.InfoS("Starting cluster-autoscaler", "version", version.Version, "provider", opts.CloudProviderName,
		"scanInterval", opts.ScanInterval, "expanders", opts.ExpanderNames, "gogc", gc.value, "gogcFrom", gc.source)

	// Metrics first: the provider reports every cloud request from its first.
	// legacyregistry, as upstream: it holds the Go and process collectors and
	// client-go's rest_client_* metrics too.
	metrics.RegisterAll(legacyregistry.Registerer(), opts.EmitPerNodeGroupMetrics)

	// The cloud config is read and checked here, before anything contacts
	// Kubernetes or the cloud, so a bad file fails fast with a clear message.
	provider, err := builder.NewCloudProvider(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	provider = shadowProvider(opts, provider)

	clients, err := newKubeClients(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}

	// A cluster without the DRA API still gets an autoscaler: without
	// DRA, said once here, instead of informers that never sync.
	served, why, err := dra.Served(clients.kube.Discovery())
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	if !served {
		opts.DynamicResourceAllocationEnabled = false
		klog.InfoS("Dynamic Resource Allocation is off: pods' resource claims and nodes' devices are not simulated", "reason", why)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	exited := make(chan struct{})
	defer close(exited)
	go cancelCloudCallsAfterGrace(ctx, exited, provider)

	health := metrics.NewHealthCheck(opts.MaxInactivityTime, opts.MaxFailingTime)
	server, err := serveHTTP(opts, health)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	defer server.Close()

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := shadowEvents(opts, broadcaster.NewRecorder(scheme.Scheme, apiv1.EventSource{Component: componentName}))

	// runCtx ends on shutdown or, under leader election, when the Lease is
	// lost; only a shutdown cleans up (a new leader owns the status by then).
	autoscale := func(runCtx context.Context) error {
		return runAutoscaler(runCtx, ctx, opts, clients, provider, recorder, health)
	}
	if !opts.LeaderElect {
		err = autoscale(ctx)
	} else {
		err = runWithLeaderElection(ctx, opts, clients.kube, recorder, autoscale)
	}
	if err != nil {
		klog.ErrorS(err, "Autoscaler stopped")
		return 1
	}
	klog.InfoS("Autoscaler stopped")
	return 0
}

// parseFlags reads the command line into options and sets up logging.
// Every problem of a bad command line is reported at once; code is the exit
// code when the process must stop (0 after --help, 2 for bad flags), -1
// otherwise.
func parseFlags(args []string) (opts config.AutoscalingOptions, code int) {
	fs := pflag.NewFlagSet(componentName, pflag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	flags := config.NewFlags(fs)
	opts, err := flags.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return opts, 0
	}
	if err != nil {
		var problems config.FlagErrors
		if errors.As(err, &problems) {
			for _, p := range problems {
				fmt.Fprintln(os.Stderr, "error:", p)
			}
		} else {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		return opts, 2
	}
	if err := flags.Logging().Apply(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return opts, 2
	}
	for _, w := range flags.Warnings() {
		klog.InfoS("Flag warning", "warning", w)
	}
	fs.VisitAll(func(f *pflag.Flag) { klog.V(2).InfoS("Flag", "name", f.Name, "value", f.Value.String()) })
	return opts, -1
}

// cancelCloudCallsAfterGrace has the provider end its calls (Cleanup)
// core.CloudCallGrace after the shutdown signal, unless the process has
// exited by then: a call retrying with long waits would otherwise hold the
// loop, and the exit, past the pod's termination grace period.
func cancelCloudCallsAfterGrace(ctx context.Context, exited <-chan struct{}, provider cloudprovider.CloudProvider) {
	select {
	case <-ctx.Done():
	case <-exited:
		return
	}
	t := time.NewTimer(core.CloudCallGrace)
	defer t.Stop()
	select {
	case <-t.C:
		klog.InfoS("Shutdown: cancelling the cloud provider's calls still running", "afterSignal", core.CloudCallGrace)
		if err := provider.Cleanup(); err != nil {
			klog.ErrorS(err, "Shutdown: provider clean-up failed")
		}
	case <-exited:
	}
}

func runAutoscaler(runCtx, shutdownCtx context.Context, opts config.AutoscalingOptions, clients kubeClients,
	provider cloudprovider.CloudProvider, recorder record.EventRecorder, health *metrics.HealthCheck) error {
	kube := clients.kube
	autoscaler, err := core.NewAutoscaler(opts, kube, clients.status, provider, recorder, health)
	if err != nil {
		return err
	}
	// CapacityBuffers run under the same leadership as the loop.
	buffers, err := capacitybuffer.New(capacitybuffer.Config{
		Controller: opts.CapacityBufferControllerEnabled, Injection: opts.CapacityBufferPodInjectionEnabled, DryRun: opts.CapacityBufferPodDryRunEnabled,
	}, kube, clients.buffers, autoscaler.Informers(), autoscaler.NotifyCapacityChange)
	if err != nil {
		return err
	}
	if buffers != nil {
		if buffers.Injector != nil {
			autoscaler.SetCapacityBuffers(buffers.Injector, buffers.Writer)
		}
		go buffers.Run(runCtx)
	}
	if opts.ProvisioningRequestsEnabled {
		if err := serveProvisioningRequests(runCtx, opts, autoscaler, clients.provisioningRequests); err != nil {
			return err
		}
	}
	health.StartMonitoring()
	err = autoscaler.Run(runCtx)
	if shutdownCtx.Err() != nil {
		autoscaler.ExitCleanUp()
		return nil // asked to stop
	}
	if err == nil && runCtx.Err() != nil {
		err = runCtx.Err()
	}
	return err
}

// kubeClients are the autoscaler's Kubernetes clients. kube (and the CRD
// clients, buffers and provisioningRequests) make its reads and writes, limited by --kube-client-qps / --kube-client-burst.
// events and status have client-go's default limits and a limiter each:
// events as upstream, since a scale-down records several events per node and
// they must not slow the taints and evictions down; status, the one write of
// the status ConfigMap per loop, so that the loop does not wait for a token
// behind the soft taints that spend the burst just before it (200 ms at the
// default 5 QPS), nor they behind it.
type kubeClients struct {
	kube, events, status kubernetes.Interface
	buffers              cbclient.Interface
	provisioningRequests prclient.Interface
}

func newKubeClients(opts config.AutoscalingOptions) (kubeClients, error) {
	var c kubeClients
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig != "" || opts.KubernetesURL != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(opts.KubernetesURL, opts.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return c, fmt.Errorf("kubernetes client configuration (--kubeconfig %q, --kubernetes %q): %v", opts.Kubeconfig, opts.KubernetesURL, err)
	}
	cfg.ContentType = opts.KubeAPIContentType
	// Uncompressed, as kube-scheduler and kube-controller-manager read the
	// same objects: a list decodes faster (kubernetes/kubernetes#112296),
	// and each watch would otherwise hold a gzip reader of about 40 KB for
	// its lifetime.
	cfg.DisableCompression = true
	cfg.UserAgent = componentName + "/" + version.Version
	// No client may send a trimmed cache copy back (informercache).
	cfg.Wrap(informercache.RefuseTrimmedWrites)
	defaultLimits := rest.CopyConfig(cfg)
	shadowTransport(opts, cfg) // the main client's and the CRDs' writes only
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("kubernetes client: %v", err)
	}
	if c.events, err = kubernetes.NewForConfig(defaultLimits); err != nil {
		return c, fmt.Errorf("kubernetes events client: %v", err)
	}
	if c.status, err = kubernetes.NewForConfig(defaultLimits); err != nil {
		return c, fmt.Errorf("kubernetes status client: %v", err)
	}
	c.status = shadowStatus(opts, c.status)
	// One cheap call, so an unreachable or unauthorised API server is reported
	// at start-up rather than as informers that never sync.
	if _, err := c.kube.Discovery().ServerVersion(); err != nil {
		return c, fmt.Errorf("cannot reach the Kubernetes API server at %s: %v", cfg.Host, err)
	}
	// The CRDs' generated clients speak JSON (custom resources have no
	// protobuf) and share one limiter with the autoscaler's limits.
	crds := rest.CopyConfig(cfg)
	crds.ContentType = runtime.ContentTypeJSON
	if cfg.QPS > 0 {
		crds.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	if c.buffers, err = cbclient.NewForConfig(crds); err != nil {
		return c, fmt.Errorf("CapacityBuffer client: %v", err)
	}
	if c.provisioningRequests, err = prclient.NewForConfig(crds); err != nil {
		return c, fmt.Errorf("ProvisioningRequest client: %v", err)
	}
	return c, nil
}

// serveProvisioningRequests (--enable-provisioning-requests) has the
// autoscaler serve ProvisioningRequests; their informer must sync before
// Run (the CRD must be installed).
func serveProvisioningRequests(ctx context.Context, opts config.AutoscalingOptions, a *core.Autoscaler, prs prclient.Interface) error {
	client, err := provisioningrequest.NewClient(prs, a.Informers(), provisioningRequestTimeout)
	if err != nil {
		return err
	}
	if err := client.AddEventHandler(a.NotifyCapacityChange); err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	pods := a.Informers().Core().V1().Pods().Lister()
	a.SetProvisioningRequests(provisioningrequest.NewManager(client, pods, provisioningrequest.Options{
		InitialBackoff: opts.ProvisioningRequestInitialBackoffTime, MaxBackoff: opts.ProvisioningRequestMaxBackoffTime,
		BackoffCacheSize: opts.ProvisioningRequestMaxBackoffCacheSize, BatchProcessing: opts.CheckCapacityBatchProcessing,
		MaxBatchSize: opts.CheckCapacityProvisioningRequestMaxBatchSize, BatchTimebox: opts.CheckCapacityProvisioningRequestBatchTimebox,
		ProcessorInstance: opts.CheckCapacityProcessorInstance,
	}), provisioningrequest.NewWriter(client))
	klog.InfoS("Serving ProvisioningRequests", "classes", []string{provreqv1.ProvisioningClassCheckCapacity, provreqv1.ProvisioningClassBestEffortAtomicScaleUp},
		"checkCapacityProcessorInstance", opts.CheckCapacityProcessorInstance)
	return nil
}

// provisioningRequestTimeout bounds one ProvisioningRequest write.
const provisioningRequestTimeout = 30 * time.Second

func serveHTTP(opts config.AutoscalingOptions, health *metrics.HealthCheck) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.Handle("/health-check", health)
	if opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	server := &http.Server{Addr: opts.Address, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	listener, err := net.Listen("tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("--address %s: %v", opts.Address, err)
	}
	klog.InfoS("Serving /metrics and /health-check", "address", listener.Addr().String())
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "address", opts.Address)
		}
	}()
	return server, nil
}

// runWithLeaderElection runs autoscale only while this replica holds the
// Lease. Losing the Lease ends the process with an error, so the Deployment
// restarts it as a follower: a replica that might still act on stale state
// must not keep running.
func runWithLeaderElection(ctx context.Context, opts config.AutoscalingOptions, kube kubernetes.Interface,
	recorder record.EventRecorder, autoscale func(context.Context) error) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %v", err)
	}
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.LeaderElectResourceName,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %v", err)
	}
	var started atomic.Bool
	done := make(chan error, 1)
	// The Lease is held on its own context, cancelled only once the
	// autoscaler has stopped and cleaned up; releasing it on the signal itself
	// would let the next leader start while this one still deletes its status.
	leaderCtx, releaseLease := context.WithCancel(context.Background())
	defer releaseLease()
	go func() {
		<-ctx.Done()
		if !started.Load() {
			releaseLease()
		}
	}()
	klog.InfoS("Waiting to acquire the Lease", "lease", klog.KRef(opts.Namespace, opts.LeaderElectResourceName), "identity", identity)
	leaderelection.RunOrDie(leaderCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaderElectLeaseDuration,
		RenewDeadline:   opts.LeaderElectRenewDeadline,
		RetryPeriod:     opts.LeaderElectRetryPeriod,
		ReleaseOnCancel: true,
		Name:            componentName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				started.Store(true)
				klog.InfoS("Acquired the Lease: this replica is the leader", "lease", klog.KRef(opts.Namespace, opts.LeaderElectResourceName))
				runCtx, stop := context.WithCancel(leaseCtx)
				defer stop()
				go func() {
					select {
					case <-ctx.Done():
						stop()
					case <-runCtx.Done():
					}
				}()
				done <- autoscale(runCtx)
				releaseLease()
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != identity {
					klog.InfoS("Another replica is the leader", "identity", id)
				}
			},
		},
	})
	if !started.Load() {
		return nil // stopped before becoming leader
	}
	if ctx.Err() != nil {
		// Shutting down: the autoscaler has finished (the Lease is released
		// after it); this only guards against a clean-up that hangs.
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("autoscaler did not stop within 30s of the shutdown signal")
		}
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	default:
	}
	return errors.New("lost the leader election Lease; exiting so that this replica restarts as a follower")
}
