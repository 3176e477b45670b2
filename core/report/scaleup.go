package report

import (
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaleup"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
	"github.com/doks-autoscaler/cluster-autoscaler/resourcequotas"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// NotTriggerScaleUpInterval is the least time between two NotTriggerScaleUp
// events of one pod, so a pod pending for hours does not flood the event
// stream (one event per loop would be one every 10 s).
const NotTriggerScaleUpInterval = 10 * time.Minute

// notTriggered remembers when each pod was last told NotTriggerScaleUp.
type notTriggered struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

var _ scaleup.Recorder = (*Reporter)(nil)

// ScaleUp records a scale-up for pending pods: the estimates' durations,
// the limits that skipped groups, a NotTriggerScaleUp event on each pod no
// option helps, then each call to the cloud in the order made, with a
// TriggeredScaleUp event on the pods of the option that grew.
func (r *Reporter) ScaleUp(plan *scaleup.Plan, out *scaleup.Outcome) {
	for _, d := range plan.EstimateTimes {
		metrics.UpdateDuration(metrics.Estimate, d)
	}
	for _, limit := range plan.LimitsHit {
		metrics.RegisterSkippedScaleUp(skippedLabel(limit))
	}
	var noGroup []*apiv1.Pod
	for _, nh := range plan.NotHelped {
		noGroup = append(noGroup, nh.Pods...)
		r.notTriggered(nh.Pods, nh.Reasons, out.Now)
	}
	for _, att := range out.Attempts {
		if att.CappedByMaxNodes {
			r.maxNodesTotalReached(out.MaxNodesTotal)
		}
		for _, c := range att.Calls {
			r.scaleUpCall(c, out.Now)
		}
		done := att.Done()
		if len(done) == 0 {
			continue
		}
		if c := att.Calls[0]; c.Creation() {
			r.events.Eventf(r.status, apiv1.EventTypeNormal, "CreatedNodeGroup",
				"Created node group %s (%s) with %d node(s) for %d pending pod(s)", c.Group.Id(), c.Planned.Id(), c.Increase.To, len(att.Pods))
		}
		r.triggered(att.Pods, done)
		if created := att.Calls[0]; created.Creation() {
			klog.InfoS("Scale-up: created a node group", "nodeGroup", created.Group.Id(), "as", created.Planned.Id(),
				"nodes", created.Increase.To, "pods", len(att.Pods), "names", framework.PodNames(att.Pods, 5))
		} else {
			klog.InfoS("Scale-up: growing node groups", "increases", increasesString(done), "pods", len(att.Pods),
				"names", framework.PodNames(att.Pods, 5), "why", att.Why)
		}
	}
	metrics.UpdateDuration(metrics.ScaleUp, out.Took)
	if out.ScaledUp() {
		return
	}
	if out.Untried == 0 && anyTrue(plan.CappedByMaxNodes) {
		r.maxNodesTotalReached(out.MaxNodesTotal)
	}
	if len(plan.NotHelped) > 0 {
		klog.InfoS("Scale-up: pending pods fit no node group", "pods", len(noGroup),
			"names", framework.PodNames(noGroup, 5), "reasons", scaleup.ReasonSummary(plan.NotHelped[0].Reasons))
	} else {
		klog.V(2).InfoS("Scale-up: no scale-up possible", "pendingPods", out.Pending)
	}
}

// ScaleUpToMinSize records the raise of groups below their min size
// (--enforce-node-group-min-size): the groups that cannot grow now in the
// log, each call as a scale-up's.
func (r *Reporter) ScaleUpToMinSize(skipped []scaleup.MinSizeSkip, calls []scaleup.Call, now time.Time) {
	for _, s := range skipped {
		klog.InfoS("Min size: node group is below its min size but cannot grow now", "nodeGroup", s.GroupID,
			"target", s.Target, "minSize", s.MinSize, "reason", s.Reason)
	}
	for _, c := range calls {
		r.scaleUpCall(c, now)
	}
	if done := (scaleup.Attempt{Calls: calls}).Done(); len(done) > 0 {
		klog.InfoS("Min size: node groups raised (--enforce-node-group-min-size)", "increases", increasesString(done))
	}
}

// Provisioned records the calls Provision made: each as a scale-up's call
// is, so a refusal backs the group off and is told the same way.
func (r *Reporter) Provisioned(calls []scaleup.Call, now time.Time) {
	for _, c := range calls {
		r.scaleUpCall(c, now)
	}
}

// scaleUpCall records one call of a scale-up: an accepted one as the
// nodes the registry now waits for, a refused one as a failed scale-up.
func (r *Reporter) scaleUpCall(c scaleup.Call, now time.Time) {
	if c.Err != nil {
		r.scaleUpFailed(c, now)
		return
	}
	if c.Creation() {
		metrics.RegisterNodeGroupCreation()
	}
	inc := c.Increase
	delta := inc.To - inc.From
	r.registry.RegisterScaleUp(c.Group, delta, now)
	gpuName, gpuType, draDrivers := metricLabels(r.provider, c.Template)
	metrics.RegisterScaleUp(delta, gpuName, gpuType, draDrivers)
	r.events.Eventf(r.status, apiv1.EventTypeNormal, "ScaledUpGroup",
		"Scale-up: setting group %s size to %d instead of %d (max: %d)", inc.GroupID, inc.To, inc.From, inc.Max)
}

// scaleUpFailed records a call the cloud refused, whether it asked to grow
// a group or to create one: the failure is counted (under the limit's code
// at an account-wide limit), the group backed off, or at an account-wide
// limit (DigitalOcean's droplet limit) every group at once, so that the
// next loops do not ask group after group for what the account cannot
// have; the status ConfigMap gets an event in the cloud's words.
func (r *Reporter) scaleUpFailed(c scaleup.Call, now time.Time) {
	inc := c.Increase
	delta := inc.To - inc.From
	if su, ok := cloudprovider.AsSizeUnavailable(c.Err); ok {
		r.sizeUnavailable(c, su)
		return
	}
	al, atLimit := cloudprovider.AsAccountLimit(c.Err)
	switch {
	case atLimit:
		klog.ErrorS(al, "Scale-up: refused at an account-wide limit", "nodeGroup", inc.GroupID, "from", inc.From, "to", inc.To)
	case c.Creation():
		klog.ErrorS(c.Err, "Scale-up: creating a node group failed", "nodeGroup", inc.GroupID, "nodes", delta)
	default:
		klog.ErrorS(c.Err, "Scale-up: increase failed", "nodeGroup", inc.GroupID, "from", inc.From, "to", inc.To)
	}
	code := metrics.FailedScaleUpCloudProviderError
	if atLimit {
		code = al.Code
	}
	metrics.RegisterError(metrics.CloudProviderError)
	metrics.RegisterFailedNodeCreations(code, delta)
	gpuName, gpuType, draDrivers := metricLabels(r.provider, c.Template)
	metrics.RegisterFailedScaleUp(code, gpuName, gpuType, draDrivers)
	if atLimit {
		until := r.registry.RegisterAccountLimit(al.Code, clusterstate.BackoffInfo{ErrorCode: al.Code, ErrorMessage: al.Message}, now)
		r.events.Eventf(r.status, apiv1.EventTypeWarning, "FailedToScaleUpGroup",
			"Scale-up failed for group %s: the cloud refused it at an account-wide limit (%s): %q; scale-up of every node group backed off until %s",
			inc.GroupID, al.Code, al.Message, until.Format(time.RFC3339))
	} else {
		r.registry.RegisterFailedScaleUp(c.Group, metrics.FailedScaleUpCloudProviderError,
			clusterstate.BackoffInfo{ErrorCode: "cloudProviderError", ErrorMessage: c.Err.Error()}, now)
		if !c.Creation() {
			r.events.Eventf(r.status, apiv1.EventTypeWarning, "FailedToScaleUpGroup", "Scale-up failed for group %s: %v", inc.GroupID, c.Err)
		}
	}
	r.groupHealth(now)
	if !c.Creation() {
		return
	}
	until := c.CreationPausedUntil.Format(time.RFC3339)
	if atLimit {
		r.events.Eventf(r.status, apiv1.EventTypeWarning, "FailedToCreateNodeGroup",
			"Creating node group %s failed at an account-wide limit (%s): %q; node pool creation backed off until %s",
			inc.GroupID, al.Code, al.Message, until)
		return
	}
	r.events.Eventf(r.status, apiv1.EventTypeWarning, "FailedToCreateNodeGroup",
		"Creating node group %s failed (node pool creation backed off until %s): %v", inc.GroupID, until, c.Err)
}

// sizeUnavailable records a call refused (or not sent) because its size
// cannot be had in the region now: counted under sizeUnavailable, told on
// the status ConfigMap, and no group backed off, since the provider holds
// the size (every group of it) for --unavailable-size-ttl and the
// executor took another size in the same loop.
func (r *Reporter) sizeUnavailable(c scaleup.Call, su *cloudprovider.SizeUnavailableError) {
	inc := c.Increase
	delta := inc.To - inc.From
	klog.InfoS("Scale-up: size unavailable in the region; another size is tried", "nodeGroup", inc.GroupID, "size", su.Size,
		"region", su.Region, "until", su.Until.UTC().Format(time.RFC3339), "why", su.Message)
	metrics.RegisterFailedNodeCreations(metrics.FailedScaleUpSizeUnavailable, delta)
	gpuName, gpuType, draDrivers := metricLabels(r.provider, c.Template)
	metrics.RegisterFailedScaleUp(metrics.FailedScaleUpSizeUnavailable, gpuName, gpuType, draDrivers)
	r.events.Eventf(r.status, apiv1.EventTypeWarning, "SizeUnavailable",
		"Size %s is unavailable in %s until %s (%s): group %s not grown; no request for the size until then",
		su.Size, su.Region, su.Until.UTC().Format(time.RFC3339), su.Message, inc.GroupID)
}

// maxNodesTotalReached records upstream's MaxNodesTotalReached event on the
// status ConfigMap: --max-nodes-total bounds a scale-up the pending pods need.
func (r *Reporter) maxNodesTotalReached(maxNodesTotal int) {
	klog.V(1).InfoS("Scale-up: max total nodes in cluster reached", "maxNodesTotal", maxNodesTotal)
	r.events.Eventf(r.status, apiv1.EventTypeWarning, "MaxNodesTotalReached", "Max total nodes in cluster reached: %v", maxNodesTotal)
}

// triggered gives each helped pod a TriggeredScaleUp event naming the
// increases made for it.
func (r *Reporter) triggered(pods []*apiv1.Pod, incs []scaleup.Increase) {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = inc.String()
	}
	msg := "[" + strings.Join(parts, " ") + "]"
	for _, p := range pods {
		r.events.Eventf(p, apiv1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: %s", msg)
	}
}

// notTriggered emits NotTriggerScaleUp, at most once per pod per
// NotTriggerScaleUpInterval.
func (r *Reporter) notTriggered(pods []*apiv1.Pod, reasons map[scaleup.Reason]int, now time.Time) {
	nt := &r.notTriggeredAt
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.last == nil {
		nt.last = map[types.UID]time.Time{}
	}
	msg := "pod didn't trigger scale-up: " + scaleup.ReasonSummary(reasons)
	for uid, t := range nt.last {
		if now.Sub(t) >= NotTriggerScaleUpInterval {
			delete(nt.last, uid)
		}
	}
	for _, p := range pods {
		if _, recent := nt.last[p.UID]; recent {
			continue
		}
		nt.last[p.UID] = now
		r.events.Event(p, apiv1.EventTypeNormal, "NotTriggerScaleUp", msg)
	}
}

// metricLabels returns the gpu_resource_name, gpu_name and dra_drivers
// labels of the scale-up metrics for a node group with this template: its
// GPU and the drivers of its ResourceSlices; empty without a template.
func metricLabels(p cloudprovider.CloudProvider, tmpl *framework.NodeInfo) (gpuName, gpuType, draDrivers string) {
	if tmpl == nil {
		return "", "", ""
	}
	gpuName, gpuType = cloudprovider.GPULabels(p, tmpl.Node())
	return gpuName, gpuType, dra.DriversLabel(tmpl.ResourceSlices())
}

// skippedLabel is the skipped_scale_events_count reason of a limit (scale-up)
// or a minimum (scale-down, which has only the CPU and memory ones).
func skippedLabel(r resourcequotas.Resource) string {
	switch r {
	case resourcequotas.Nodes:
		return metrics.SkippedMaxNodesTotalReached
	case resourcequotas.CPU:
		return metrics.SkippedCPUResourceLimit
	case resourcequotas.Cost:
		return metrics.SkippedHourlyCostLimit
	case resourcequotas.Quota:
		return metrics.SkippedDropletQuota
	}
	return metrics.SkippedMemoryResourceLimit
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

// increasesString renders the increases for the scale-up log line.
func increasesString(incs []scaleup.Increase) string {
	parts := make([]string, len(incs))
	for i, inc := range incs {
		parts[i] = fmt.Sprintf("node group %s %d->%d (max: %d)", inc.GroupID, inc.From, inc.To, inc.Max)
	}
	return strings.Join(parts, ", ")
}
