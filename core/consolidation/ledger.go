package consolidation

import (
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ledger remembers which workloads consolidation moved, and when, so that
// no workload's pods are moved twice within a cooldown: a Deployment of
// ten pods spread over ten nodes is disrupted once per cooldown, not ten
// times, whatever the commands that reach its nodes. A workload is a pod's
// controller; a ReplicaSet made by a Deployment counts as that Deployment,
// so a rollout between two commands does not reset the count. Entries
// older than the cooldown are dropped when the ledger is read, so it holds
// at most the workloads moved within one cooldown.
type Ledger struct {
	cooldown time.Duration
	moved    map[workload]time.Time
}

// workload is a pod's controller as the ledger keys it: a struct, so that
// asking about every pod of 5,000 candidate nodes each loop builds no
// string.
type workload struct{ namespace, kind, name string }

func (w workload) String() string { return w.namespace + "/" + w.kind + "/" + w.name }

// NewLedger returns a ledger that keeps a workload for cooldown after its
// pods were moved.
func NewLedger(cooldown time.Duration) *Ledger {
	return &Ledger{cooldown: cooldown, moved: map[workload]time.Time{}}
}

// Record notes that pods were moved at now.
func (l *Ledger) Record(pods []*apiv1.Pod, now time.Time) {
	for _, p := range pods {
		if w, ok := workloadOf(p); ok {
			l.moved[w] = now
		}
	}
}

// Recent reports whether p's workload was moved within the cooldown of now.
func (l *Ledger) Recent(p *apiv1.Pod, now time.Time) bool {
	if len(l.moved) == 0 {
		return false
	}
	w, ok := workloadOf(p)
	if !ok {
		return false
	}
	at, ok := l.moved[w]
	return ok && now.Sub(at) < l.cooldown
}

// Prune drops the workloads moved a cooldown or more before now.
func (l *Ledger) Prune(now time.Time) {
	for w, at := range l.moved {
		if now.Sub(at) >= l.cooldown {
			delete(l.moved, w)
		}
	}
}

// Len is how many workloads the ledger holds.
func (l *Ledger) Len() int { return len(l.moved) }

// Workload names p's workload, "namespace/Kind/name" of its controller (a
// Deployment for a ReplicaSet carrying the pod-template-hash suffix);
// false for a pod without a controller (such a pod blocks its node's
// drain anyway).
func Workload(p *apiv1.Pod) (string, bool) {
	w, ok := workloadOf(p)
	if !ok {
		return "", false
	}
	return w.String(), true
}

func workloadOf(p *apiv1.Pod) (workload, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return workload{}, false
	}
	kind, name := ref.Kind, ref.Name
	if kind == "ReplicaSet" {
		if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(name, "-"+h) {
			kind, name = "Deployment", strings.TrimSuffix(name, "-"+h)
		}
	}
	return workload{p.Namespace, kind, name}, true
}

// WorkloadKind is the kind of p's workload ("" without a controller), the
// owner_kind label of the eviction metric.
func WorkloadKind(p *apiv1.Pod) string {
	w, _ := workloadOf(p)
	return w.kind
}
