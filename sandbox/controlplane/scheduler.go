package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// startScheduler runs kube-scheduler in-process. The upstream test helper wants a
// *testing.T, so this does the same steps itself: options from flags, Setup, Run. Its
// HTTPS endpoint is disabled (--secure-port=0): readiness is taken from the scheduler's
// own event-handler sync instead of /healthz.
func (c *ControlPlane) startScheduler(ctx context.Context) error {
	featureGate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	effectiveVersion := utilcompatibility.DefaultKubeEffectiveVersionForTest()
	effectiveVersion.SetEmulationVersion(featureGate.EmulationVersion())
	effectiveVersion.SetMinCompatibilityVersion(featureGate.MinCompatibilityVersion())
	// A private registry, like the upstream helper: the default one is process-global.
	registry := compatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(compatibility.DefaultKubeComponent, effectiveVersion, featureGate); err != nil {
		return err
	}
	opts := scheduleroptions.NewOptionsWithComponentGlobalsRegistry(registry)
	fs := pflag.NewFlagSet("sandbox-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse([]string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		// Without these the scheduler's own defaults (50 and 100) cap binding and
		// marking pods unschedulable at about 50 pods a second.
		"--kube-api-qps=" + strconv.Itoa(ClientQPS),
		"--kube-api-burst=" + strconv.Itoa(ClientBurst),
	}); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	cc, sched, err := schedulerapp.Setup(ctx, opts)
	if err != nil {
		return err
	}
	c.schedulerClient = cc.KubeConfig
	// A failure before the informers sync is returned; one after it has no
	// caller left to return to, so it is logged there.
	errCh := make(chan error)
	returned := make(chan struct{})
	defer close(returned)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer configz.Delete("componentconfig")
		if err := schedulerapp.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			select {
			case errCh <- err:
			case <-returned:
				klog.Errorf("sandbox kube-scheduler stopped: %v", err)
			}
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	synced := make(chan error, 1)
	go func() { synced <- sched.WaitForHandlersSync(syncCtx) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("kube-scheduler stopped before its informers synced: %w", err)
	case err := <-synced:
		if err != nil {
			return fmt.Errorf("scheduler informers did not sync: %w", err)
		}
	}
	return nil
}
