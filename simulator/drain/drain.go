// Package drain decides which pods must be moved to empty a node, and which
// pod, if any, forbids removing it.
package drain

import (
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// NewOptions returns the drain rules the flags select, for the planner and
// the actuator alike. controllerReplicas looks up a pod's controller; nil
// skips the missing-controller and --min-replica-count checks.
// BudgetsLeftToEviction is left for the caller that evicts to set.
func NewOptions(o config.AutoscalingOptions, controllerReplicas func(namespace string, controller metav1.OwnerReference) (replicas int32, found bool)) Options {
	return Options{
		SkipNodesWithLocalStorage:         o.SkipNodesWithLocalStorage,
		SkipNodesWithSystemPods:           o.SkipNodesWithSystemPods,
		BspDisruptionTimeout:              o.BspDisruptionTimeout,
		SkipNodesWithCustomControllerPods: o.SkipNodesWithCustomControllerPods,
		MinReplicaCount:                   o.MinReplicaCount,
		ControllerReplicas:                controllerReplicas,
	}
}

// Annotation keys and values, as upstream names them.
const (
	// SafeToEvictKey "true" makes a pod movable whatever else it has; "false"
	// makes it block removal of its node.
	SafeToEvictKey = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// SafeToEvictLocalVolumesKey lists (comma separated) local volumes whose
	// loss the pod accepts.
	SafeToEvictLocalVolumesKey = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	// DaemonSetPodKey "true" marks a pod as a DaemonSet pod without an owner reference.
	DaemonSetPodKey = "cluster-autoscaler.kubernetes.io/daemonset-pod"
	// MirrorPodKey is set by the kubelet on mirror pods of static pods.
	MirrorPodKey = "kubernetes.io/config.mirror"
	// DoNotDisruptKey is Karpenter's annotation, accepted as an alias so
	// that workloads moving from Karpenter keep their protection: "true"
	// on a pod reads as SafeToEvictKey "false", on a node as
	// cluster-autoscaler.kubernetes.io/scale-down-disabled "true".
	DoNotDisruptKey = "karpenter.sh/do-not-disrupt"
	// ScaleDownDisabledKey "true" on a node keeps the autoscaler from
	// removing it.
	ScaleDownDisabledKey = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
)

// NodeNotToDisrupt reports whether a node is marked never to be removed by
// the autoscaler: ScaleDownDisabledKey "true", or its alias DoNotDisruptKey
// "true".
func NodeNotToDisrupt(n *apiv1.Node) bool {
	return n.Annotations[ScaleDownDisabledKey] == "true" || n.Annotations[DoNotDisruptKey] == "true"
}

// NotToDisrupt reports whether a pod is marked never to be evicted by the
// autoscaler: SafeToEvictKey "false", or its alias DoNotDisruptKey "true".
func NotToDisrupt(pod *apiv1.Pod) bool {
	return pod.Annotations[SafeToEvictKey] == "false" || pod.Annotations[DoNotDisruptKey] == "true"
}

// LongTerminatingExtra is how long past its grace period a deleting pod is
// still treated as alive. After that it is assumed gone and ignored.
const LongTerminatingExtra = 30 * time.Second

// Options are the drain rules' flags.
type Options struct {
	// SkipNodesWithLocalStorage: pods with hostPath or disk-backed emptyDir
	// volumes block removal.
	SkipNodesWithLocalStorage bool
	// SkipNodesWithSystemPods: kube-system pods not covered by a PDB block
	// removal, until they are older than BspDisruptionTimeout.
	SkipNodesWithSystemPods bool
	// BspDisruptionTimeout (--blocking-system-pod-distruption-timeout): past
	// this age a kube-system pod without a PDB is movable, local storage or
	// not, as upstream's system-pod rule has it.
	BspDisruptionTimeout time.Duration
	// SkipNodesWithCustomControllerPods: only pods of built-in replicating
	// controllers (ReplicaSet, ReplicationController, StatefulSet, Job;
	// Deployments own their pods through ReplicaSets) count as replicated.
	SkipNodesWithCustomControllerPods bool
	// MinReplicaCount: pods of a ReplicaSet or ReplicationController with
	// fewer desired replicas block removal. Needs ControllerReplicas.
	MinReplicaCount int
	// ControllerReplicas, when set, looks up a pod's controller: found=false
	// means the controller does not exist (ControllerNotFound); replicas is
	// its desired replica count. Without it neither check is made.
	ControllerReplicas func(namespace string, controller metav1.OwnerReference) (replicas int32, found bool)
	// BudgetsLeftToEviction: PDBs only say which pods they cover (for
	// SkipNodesWithSystemPods); their disruption budgets are not checked,
	// the Eviction API enforces them.
	BudgetsLeftToEviction bool
}

// BlockingPodReason says why a pod prevents removal of its node.
type BlockingPodReason int

// The reasons, named as upstream names them.
const (
	NoReason BlockingPodReason = iota
	ControllerNotFound
	MinReplicasReached
	NotReplicated
	LocalStorageRequested
	NotSafeToEvictAnnotation
	UnmovableKubeSystemPod
	NotEnoughPdb
	UnexpectedError
)

// String returns the reason's name.
func (r BlockingPodReason) String() string {
	switch r {
	case NoReason:
		return "NoReason"
	case ControllerNotFound:
		return "ControllerNotFound"
	case MinReplicasReached:
		return "MinReplicasReached"
	case NotReplicated:
		return "NotReplicated"
	case LocalStorageRequested:
		return "LocalStorageRequested"
	case NotSafeToEvictAnnotation:
		return "NotSafeToEvictAnnotation"
	case UnmovableKubeSystemPod:
		return "UnmovableKubeSystemPod"
	case NotEnoughPdb:
		return "NotEnoughPdb"
	case UnexpectedError:
		return "UnexpectedError"
	}
	return fmt.Sprintf("BlockingPodReason(%d)", int(r))
}

// BlockingPod is a pod that prevents removal of its node, and why.
type BlockingPod struct {
	Pod    *apiv1.Pod
	Reason BlockingPodReason
}

// replicatedKinds are the controllers that recreate their pods elsewhere.
var replicatedKinds = map[string]bool{
	"ReplicaSet":            true,
	"ReplicationController": true,
	"StatefulSet":           true,
	"Job":                   true,
	"Deployment":            true,
}

// Expendable reports whether a pod's priority is below cutoff
// (--expendable-pods-priority-cutoff): such a pod neither causes a scale-up
// nor keeps a node; it goes with its node.
func Expendable(p *apiv1.Pod, cutoff int) bool {
	prio := int32(0)
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	return prio < int32(cutoff)
}

// WithoutExpendable returns pods without the expendable ones.
func WithoutExpendable(pods []*apiv1.Pod, cutoff int) []*apiv1.Pod {
	out := make([]*apiv1.Pod, 0, len(pods))
	for _, p := range pods {
		if !Expendable(p, cutoff) {
			out = append(out, p)
		}
	}
	return out
}

// PodsToMove returns the pods that must be evicted to empty the node, or the
// first pod that blocks its removal and why. DaemonSet pods, mirror pods,
// completed pods and pods terminating for longer than their grace period
// (plus LongTerminatingExtra) are neither moved nor blocking. pdbs: all PDBs
// in the cluster; a PDB blocks when the node holds more of its pods than its
// status.disruptionsAllowed.
func PodsToMove(pods []*apiv1.Pod, pdbs []*policyv1.PodDisruptionBudget, opts Options, now time.Time) (toMove []*apiv1.Pod, blocking *BlockingPod) {
	matchers, err := newPDBMatchers(pdbs)
	if err != nil {
		klog.InfoS("Drain: PodDisruptionBudgets with invalid selectors ignored", "err", err)
	}
	used := make([]int32, len(matchers))
	for _, pod := range pods {
		if pod == nil || Skipped(pod, now) {
			continue
		}
		if NotToDisrupt(pod) {
			return nil, block(pod, NotSafeToEvictAnnotation)
		}
		covering := matchingPDBs(matchers, pod)
		for _, i := range covering {
			if opts.BudgetsLeftToEviction {
				continue // coverage only
			}
			used[i]++
			if used[i] > matchers[i].pdb.Status.DisruptionsAllowed {
				klog.V(4).InfoS("Drain: pod is protected by a PodDisruptionBudget", "pod", klog.KObj(pod),
					"pdb", klog.KObj(matchers[i].pdb), "disruptionsAllowed", matchers[i].pdb.Status.DisruptionsAllowed)
				return nil, block(pod, NotEnoughPdb)
			}
		}
		if pod.Annotations[SafeToEvictKey] == "true" {
			toMove = append(toMove, pod)
			continue
		}
		if reason := replicationReason(pod, opts); reason != NoReason {
			return nil, block(pod, reason)
		}
		if opts.SkipNodesWithSystemPods && pod.Namespace == metav1.NamespaceSystem && len(covering) == 0 {
			if !systemPodGraceOver(pod, opts.BspDisruptionTimeout, now) {
				return nil, block(pod, UnmovableKubeSystemPod)
			}
			toMove = append(toMove, pod)
			continue
		}
		if opts.SkipNodesWithLocalStorage && hasUnsafeLocalStorage(pod) {
			return nil, block(pod, LocalStorageRequested)
		}
		toMove = append(toMove, pod)
	}
	return toMove, nil
}

// SpendDisruptions returns pdbs with the disruptions the eviction of pods would
// use taken off each covering PDB's status.disruptionsAllowed (never below
// zero). A planner that removes several nodes in one pass passes the result to
// the next node's check, so the nodes together never need more evictions than
// a PDB allows. PDBs that pods do not touch are returned as they are; the
// others are copies, so the caller's objects are never changed.
func SpendDisruptions(pdbs []*policyv1.PodDisruptionBudget, pods []*apiv1.Pod) []*policyv1.PodDisruptionBudget {
	matchers, _ := newPDBMatchers(pdbs) // bad selectors were reported by PodsToMove
	spent := map[*policyv1.PodDisruptionBudget]int32{}
	for _, pod := range pods {
		for _, i := range matchingPDBs(matchers, pod) {
			spent[matchers[i].pdb]++
		}
	}
	if len(spent) == 0 {
		return pdbs
	}
	out := make([]*policyv1.PodDisruptionBudget, len(pdbs))
	for i, pdb := range pdbs {
		n, touched := spent[pdb]
		if !touched {
			out[i] = pdb
			continue
		}
		c := pdb.DeepCopy()
		c.Status.DisruptionsAllowed = max(0, c.Status.DisruptionsAllowed-n)
		out[i] = c
	}
	return out
}

func block(pod *apiv1.Pod, reason BlockingPodReason) *BlockingPod {
	klog.V(4).InfoS("Drain: pod blocks node removal", "pod", klog.KObj(pod), "reason", reason.String())
	return &BlockingPod{Pod: pod, Reason: reason}
}

// Skipped reports whether a drain leaves pod where it is: it needs no
// moving and never blocks (mirror, DaemonSet, finished, long terminating).
// Every other pod of a node PodsToMove does not refuse is one it moves.
func Skipped(pod *apiv1.Pod, now time.Time) bool {
	return IsMirrorPod(pod) || IsDaemonSetPod(pod) ||
		pod.Status.Phase == apiv1.PodSucceeded || pod.Status.Phase == apiv1.PodFailed ||
		isLongTerminating(pod, now)
}

// systemPodGraceOver reports whether the kube-system pod was created more
// than timeout ago. A pod without a creation time (never from the API
// server) stays blocking.
func systemPodGraceOver(pod *apiv1.Pod, timeout time.Duration, now time.Time) bool {
	created := pod.CreationTimestamp.Time
	return !created.IsZero() && now.After(created.Add(timeout))
}

// IsMirrorPod tells a kubelet mirror pod (of a static pod).
func IsMirrorPod(pod *apiv1.Pod) bool {
	_, found := pod.Annotations[MirrorPodKey]
	return found
}

// IsDaemonSetPod tells a pod controlled by a DaemonSet, or annotated as one.
func IsDaemonSetPod(pod *apiv1.Pod) bool {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "DaemonSet" {
		return true
	}
	return pod.Annotations[DaemonSetPodKey] == "true"
}

// isLongTerminating reports whether the pod's deletion started and its grace
// period plus LongTerminatingExtra has run out. The kubelet has most likely
// finished with it; the object lingers only because of finalizers or a lost
// node.
func isLongTerminating(pod *apiv1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	grace := time.Duration(apiv1.DefaultTerminationGracePeriodSeconds) * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	// The API server sets deletionTimestamp to the deletion time plus the
	// grace period, so the grace period is already inside it; adding it again
	// errs on keeping the pod, which is the safe side.
	return now.After(pod.DeletionTimestamp.Add(grace + LongTerminatingExtra))
}

func replicationReason(pod *apiv1.Pod, opts Options) BlockingPodReason {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return NotReplicated
	}
	if opts.SkipNodesWithCustomControllerPods && !replicatedKinds[ref.Kind] {
		return NotReplicated
	}
	if opts.ControllerReplicas == nil || !replicatedKinds[ref.Kind] {
		return NoReason
	}
	replicas, found := opts.ControllerReplicas(pod.Namespace, *ref)
	if !found {
		return ControllerNotFound
	}
	if (ref.Kind == "ReplicaSet" || ref.Kind == "ReplicationController") && int(replicas) < opts.MinReplicaCount {
		return MinReplicasReached
	}
	return NoReason
}

// hasUnsafeLocalStorage reports whether the pod has a hostPath or
// disk-backed emptyDir volume not listed in the
// safe-to-evict-local-volumes annotation. A memory-backed emptyDir is tmpfs:
// its content dies with the pod anyway, so moving the pod loses nothing.
//
// It allocates nothing: every loop asks it of every pod of every candidate.
func hasUnsafeLocalStorage(pod *apiv1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != apiv1.StorageMediumMemory)
		if local && !localVolumeAccepted(pod.Annotations[SafeToEvictLocalVolumesKey], v.Name) {
			return true
		}
	}
	return false
}

// localVolumeAccepted reports whether name is in list, the comma-separated
// safe-to-evict-local-volumes annotation (spaces around names ignored).
func localVolumeAccepted(list, name string) bool {
	for list != "" {
		var item string
		item, list, _ = strings.Cut(list, ",")
		if item = strings.TrimSpace(item); item != "" && item == name {
			return true
		}
	}
	return false
}

type pdbMatcher struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
}

func newPDBMatchers(pdbs []*policyv1.PodDisruptionBudget) ([]pdbMatcher, error) {
	var out []pdbMatcher
	var bad []string
	for _, pdb := range pdbs {
		if pdb == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s/%s: %v", pdb.Namespace, pdb.Name, err))
			continue
		}
		out = append(out, pdbMatcher{pdb: pdb, selector: sel})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("ignoring PDBs with invalid selectors: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

// matchingPDBs returns the indexes of the PDBs in the pod's namespace whose
// selector matches it. As in the eviction API, an empty selector matches
// every pod of the namespace and a nil selector matches none.
func matchingPDBs(matchers []pdbMatcher, pod *apiv1.Pod) []int {
	var out []int
	for i, m := range matchers {
		if m.pdb.Namespace != pod.Namespace || m.pdb.Spec.Selector == nil {
			continue
		}
		if m.selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, i)
		}
	}
	return out
}
