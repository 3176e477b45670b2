package actuation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// evictByPriority evicts the node's pods group by group of
// --drain-priority-config, lowest priority first, each group with its own
// grace period and waited for before the next starts, as upstream; with
// the priority config the DaemonSet pods are among them, evicted and
// waited for as the others. Without it, one group: every pod at once,
// bounded by --max-graceful-termination-sec, DaemonSet pods best effort.
func (a *Actuator) evictByPriority(ctx context.Context, n *apiv1.Node, pods, ds []*apiv1.Pod) error {
	if len(a.opts.DrainPriorities) == 0 {
		return a.evictAll(ctx, n, pods, ds, int64(a.opts.MaxGracefulTerminationSec))
	}
	groups := a.opts.DrainPriorities
	byGroup := make([][]*apiv1.Pod, len(groups))
	for _, p := range append(slices.Clip(pods), ds...) {
		i := drainGroupOf(p, groups)
		byGroup[i] = append(byGroup[i], p)
	}
	for i, g := range groups {
		if len(byGroup[i]) == 0 {
			continue
		}
		klog.V(2).InfoS("Scale-down: evicting a priority group", "node", klog.KObj(n), "priority", g.Priority, "gracePeriodSeconds", g.GracePeriodSeconds, "pods", framework.PodNames(byGroup[i], 5))
		if err := a.evictAll(ctx, n, byGroup[i], nil, g.GracePeriodSeconds); err != nil {
			return fmt.Errorf("priority group %d: %w", g.Priority, err)
		}
	}
	return nil
}

// drainGroupOf is the group of a pod: the highest rule whose priority is
// at most the pod's; pods below the lowest rule go with it.
func drainGroupOf(p *apiv1.Pod, groups []config.DrainPriority) int {
	var prio int32
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	i := 0
	for j, g := range groups {
		if g.Priority <= prio {
			i = j
		}
	}
	return i
}

// evictAll evicts pods in parallel, each retried (PDB refusals come back as
// 429) until --max-pod-eviction-time, then waits for all of them to be gone
// for up to --max-graceful-termination-sec plus headroom. The bestEffort
// (DaemonSet) pods are evicted alongside: their failures are logged only,
// and their going is not waited for, as upstream does.
func (a *Actuator) evictAll(ctx context.Context, n *apiv1.Node, pods, bestEffort []*apiv1.Pod, maxGrace int64) error {
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func(i int, p *apiv1.Pod) {
			defer wg.Done()
			errs[i] = a.evict(ctx, p, deadline, maxGrace)
		}(i, p)
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.evictBestEffort(ctx, n, bestEffort, maxGrace) }()
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s: %v", pods[i].Namespace, pods[i].Name, err))
		}
	}
	a.deps.Outcomes.EvictionsEnded(scaledown.Evictions{Succeeded: len(pods) - len(failed), Failed: len(failed)})
	if len(failed) > 0 {
		return fmt.Errorf("evicting %d pod(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}

	waitUntil := a.clock.Now().Add(time.Duration(maxGrace)*time.Second + PodEvictionHeadroom)
	for {
		remaining := a.stillRunning(ctx, n, pods)
		if len(remaining) == 0 {
			return nil
		}
		if !a.clock.Now().Before(waitUntil) {
			return fmt.Errorf("%d evicted pod(s) still on the node after %ds: %s", len(remaining),
				maxGrace+int64(PodEvictionHeadroom/time.Second), framework.PodNames(remaining, 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.podGoneCheckInterval):
		}
	}
}

func (a *Actuator) evict(ctx context.Context, p *apiv1.Pod, deadline time.Time, maxGrace int64) error {
	grace := maxGrace
	switch {
	case p.Spec.TerminationGracePeriodSeconds != nil && (grace == 0 || *p.Spec.TerminationGracePeriodSeconds < grace):
		grace = *p.Spec.TerminationGracePeriodSeconds
	case grace == 0:
		// A group of --drain-priority-config with 0 seconds caps nothing
		// (upstream's reading): the pod's own, defaulted, period.
		grace = apiv1.DefaultTerminationGracePeriodSeconds
	}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace},
	}
	attempts := 0
	for {
		attempts++
		err := a.deps.Kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			a.deps.Outcomes.PodEvicted(p)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		}
		if !a.clock.Now().Before(deadline) {
			return fmt.Errorf("still refused after %d attempt(s) over %s: %w", attempts, a.opts.MaxPodEvictionTime, err)
		}
		if apierrors.IsTooManyRequests(err) {
			klog.V(2).InfoS("Scale-down: eviction refused by a disruption budget; retrying", "pod", klog.KObj(p))
		} else {
			klog.InfoS("Scale-down: eviction failed; retrying", "pod", klog.KObj(p), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.evictionRetryInterval):
		}
	}
}

// markNode taints the node ToBeDeletedByClusterAutoscaler and, with
// --cordon-node-before-terminating, cordons it in the same update.
func (a *Actuator) markNode(ctx context.Context, n *apiv1.Node) error {
	if _, err := MarkToBeDeleted(ctx, a.deps.Kube, n.Name, n, a.clock.Now(), a.opts.CordonNodeBeforeTerminate); err != nil {
		return err
	}
	a.deps.Outcomes.NodeTainted(n)
	return nil
}

// EnableDsEvictionKey on a DaemonSet pod says whether it is evicted before
// its node goes ("true" / "false"), whatever the flags say.
const EnableDsEvictionKey = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"

// daemonSetPodsToEvict picks the node's DaemonSet pods (mirror pods aside)
// that get an eviction: those annotated true, and unannotated ones when
// byDefault (--daemonset-eviction-for-occupied-nodes / -empty-nodes).
func daemonSetPodsToEvict(pods []*apiv1.Pod, byDefault bool) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, p := range pods {
		if !drain.IsDaemonSetPod(p) || drain.IsMirrorPod(p) || p.DeletionTimestamp != nil {
			continue
		}
		if v, ok := p.Annotations[EnableDsEvictionKey]; ok {
			if v == "true" {
				out = append(out, p)
			}
			continue
		}
		if byDefault {
			out = append(out, p)
		}
	}
	return out
}

// evictBestEffort evicts pods in parallel (retried until
// --max-pod-eviction-time) and waits for the calls, not for the pods: a
// failure is logged and does not stop the node's removal.
func (a *Actuator) evictBestEffort(ctx context.Context, n *apiv1.Node, pods []*apiv1.Pod, maxGrace int64) {
	if len(pods) == 0 {
		return
	}
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func(p *apiv1.Pod) {
			defer wg.Done()
			if err := a.evict(ctx, p, deadline, maxGrace); err != nil {
				klog.InfoS("Scale-down: DaemonSet pod not evicted (best effort; the node goes anyway)", "pod", klog.KObj(p), "node", klog.KObj(n), "err", err)
			}
		}(p)
	}
	wg.Wait()
}

// withoutExpendable drops the pods below --expendable-pods-priority-cutoff:
// the plan did not count them, and they go with the node.
func (a *Actuator) withoutExpendable(pods []*apiv1.Pod) []*apiv1.Pod {
	return drain.WithoutExpendable(pods, a.opts.ExpendablePodsPriorityCutoff)
}
