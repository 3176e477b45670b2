package drain

import (
	"slices"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type podOpt func(*apiv1.Pod)

func pod(name string, opts ...podOpt) *apiv1.Pod {
	p := &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: map[string]string{"app": "web"}},
		Spec:       apiv1.PodSpec{NodeName: "n1"},
		Status:     apiv1.PodStatus{Phase: apiv1.PodRunning},
	}
	owned("ReplicaSet", "web-rs")(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

func owned(kind, name string) podOpt {
	return func(p *apiv1.Pod) {
		ctrl := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: name, UID: types.UID(kind + name), Controller: &ctrl}}
	}
}

func bare() podOpt { return func(p *apiv1.Pod) { p.OwnerReferences = nil } }

func annotated(k, v string) podOpt {
	return func(p *apiv1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// created sets the pod's creation time to age before now.
func created(age time.Duration) podOpt {
	return func(p *apiv1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-age)) }
}

func withTimeout(o Options, d time.Duration) Options {
	o.BspDisruptionTimeout = d
	return o
}

func inNamespace(ns string) podOpt { return func(p *apiv1.Pod) { p.Namespace = ns } }

func phase(ph apiv1.PodPhase) podOpt { return func(p *apiv1.Pod) { p.Status.Phase = ph } }

func volume(v apiv1.Volume) podOpt {
	return func(p *apiv1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) }
}

func emptyDir(name string, medium apiv1.StorageMedium) apiv1.Volume {
	return apiv1.Volume{Name: name, VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{Medium: medium}}}
}

func hostPath(name string) apiv1.Volume {
	return apiv1.Volume{Name: name, VolumeSource: apiv1.VolumeSource{HostPath: &apiv1.HostPathVolumeSource{Path: "/var/data"}}}
}

func deleting(ago time.Duration) podOpt {
	return func(p *apiv1.Pod) {
		ts := metav1.NewTime(now.Add(-ago))
		p.DeletionTimestamp = &ts
		grace := int64(30)
		p.DeletionGracePeriodSeconds = &grace
	}
}

func pdb(ns string, allowed int32, selector map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

var strict = Options{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true, SkipNodesWithCustomControllerPods: true}

func TestPodsToMove(t *testing.T) {
	tests := []struct {
		name      string
		pods      []*apiv1.Pod
		pdbs      []*policyv1.PodDisruptionBudget
		opts      Options
		wantMoved []string
		wantBlock BlockingPodReason // NoReason = not blocked
		blockedBy string
	}{
		{name: "replicated pods move", pods: []*apiv1.Pod{pod("a"), pod("b", owned("StatefulSet", "db")), pod("c", owned("Job", "j")), pod("d", owned("ReplicationController", "rc"))},
			opts: strict, wantMoved: []string{"a", "b", "c", "d"}},

		{name: "DaemonSet pod is neither moved nor blocking", pods: []*apiv1.Pod{pod("ds", owned("DaemonSet", "agent"), inNamespace("kube-system")), pod("a")},
			opts: strict, wantMoved: []string{"a"}},
		{name: "DaemonSet annotation counts as DaemonSet", pods: []*apiv1.Pod{pod("ds", bare(), annotated(DaemonSetPodKey, "true"))},
			opts: strict, wantMoved: nil},
		{name: "mirror pod is neither moved nor blocking", pods: []*apiv1.Pod{pod("static", bare(), inNamespace("kube-system"), annotated(MirrorPodKey, "abc"))},
			opts: strict, wantMoved: nil},

		{name: "safe-to-evict false blocks", pods: []*apiv1.Pod{pod("a"), pod("b", annotated(SafeToEvictKey, "false"))},
			opts: strict, wantBlock: NotSafeToEvictAnnotation, blockedBy: "b"},
		{name: "Karpenter's do-not-disrupt blocks, an alias", pods: []*apiv1.Pod{pod("a"), pod("b", annotated(DoNotDisruptKey, "true"))},
			opts: strict, wantBlock: NotSafeToEvictAnnotation, blockedBy: "b"},
		{name: "safe-to-evict other value does not block", pods: []*apiv1.Pod{pod("b", annotated(SafeToEvictKey, "maybe"))},
			opts: strict, wantMoved: []string{"b"}},

		{name: "bare pod blocks", pods: []*apiv1.Pod{pod("bare", bare())},
			opts: strict, wantBlock: NotReplicated, blockedBy: "bare"},
		{name: "bare pod with safe-to-evict true moves", pods: []*apiv1.Pod{pod("bare", bare(), annotated(SafeToEvictKey, "true"))},
			opts: strict, wantMoved: []string{"bare"}},
		{name: "custom controller blocks with SkipNodesWithCustomControllerPods", pods: []*apiv1.Pod{pod("x", owned("MyOperatorSet", "x"))},
			opts: strict, wantBlock: NotReplicated, blockedBy: "x"},
		{name: "custom controller moves without SkipNodesWithCustomControllerPods", pods: []*apiv1.Pod{pod("x", owned("MyOperatorSet", "x"))},
			opts: Options{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true}, wantMoved: []string{"x"}},
		{name: "bare pod blocks even without SkipNodesWithCustomControllerPods", pods: []*apiv1.Pod{pod("bare", bare())},
			opts: Options{}, wantBlock: NotReplicated, blockedBy: "bare"},

		{name: "emptyDir blocks with SkipNodesWithLocalStorage", pods: []*apiv1.Pod{pod("a", volume(emptyDir("scratch", "")))},
			opts: strict, wantBlock: LocalStorageRequested, blockedBy: "a"},
		{name: "hostPath blocks with SkipNodesWithLocalStorage", pods: []*apiv1.Pod{pod("a", volume(hostPath("data")))},
			opts: strict, wantBlock: LocalStorageRequested, blockedBy: "a"},
		{name: "memory emptyDir is not local storage", pods: []*apiv1.Pod{pod("a", volume(emptyDir("tmp", apiv1.StorageMediumMemory)))},
			opts: strict, wantMoved: []string{"a"}},
		{name: "local volumes listed as safe", pods: []*apiv1.Pod{pod("a", volume(emptyDir("scratch", "")), volume(hostPath("data")), annotated(SafeToEvictLocalVolumesKey, "scratch, data"))},
			opts: strict, wantMoved: []string{"a"}},
		{name: "one local volume not listed", pods: []*apiv1.Pod{pod("a", volume(emptyDir("scratch", "")), volume(hostPath("data")), annotated(SafeToEvictLocalVolumesKey, "scratch"))},
			opts: strict, wantBlock: LocalStorageRequested, blockedBy: "a"},
		{name: "local storage moves without SkipNodesWithLocalStorage", pods: []*apiv1.Pod{pod("a", volume(emptyDir("scratch", "")))},
			opts: Options{SkipNodesWithSystemPods: true}, wantMoved: []string{"a"}},
		{name: "local storage with safe-to-evict true moves", pods: []*apiv1.Pod{pod("a", volume(hostPath("data")), annotated(SafeToEvictKey, "true"))},
			opts: strict, wantMoved: []string{"a"}},

		{name: "kube-system pod without PDB blocks", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"))},
			opts: strict, wantBlock: UnmovableKubeSystemPod, blockedBy: "dns"},
		{name: "kube-system pod with a PDB moves", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"))},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kube-system", 1, map[string]string{"app": "web"})},
			opts: strict, wantMoved: []string{"dns"}},
		{name: "kube-system pod moves without SkipNodesWithSystemPods", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"))},
			opts: Options{SkipNodesWithLocalStorage: true}, wantMoved: []string{"dns"}},
		// --blocking-system-pod-distruption-timeout: the pod keeps its node
		// only until it is older than the timeout.
		{name: "kube-system pod younger than the timeout blocks", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"), created(30*time.Minute))},
			opts: withTimeout(strict, time.Hour), wantBlock: UnmovableKubeSystemPod, blockedBy: "dns"},
		{name: "kube-system pod older than the timeout moves", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"), created(30*time.Minute))},
			opts: withTimeout(strict, 10*time.Minute), wantMoved: []string{"dns"}},
		{name: "timeout 0: any kube-system pod with a creation time moves", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"), created(time.Second))},
			opts: withTimeout(strict, 0), wantMoved: []string{"dns"}},
		{name: "kube-system pod past the timeout moves despite local storage (upstream's rule)", pods: []*apiv1.Pod{pod("metrics", inNamespace("kube-system"), created(2*time.Hour), volume(emptyDir("tmp", "")))},
			opts: withTimeout(strict, time.Hour), wantMoved: []string{"metrics"}},
		{name: "kube-system pod past the timeout with safe-to-evict=false still blocks", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"), created(2*time.Hour), annotated(SafeToEvictKey, "false"))},
			opts: withTimeout(strict, time.Hour), wantBlock: NotSafeToEvictAnnotation, blockedBy: "dns"},
		{name: "bare kube-system pod past the timeout still blocks", pods: []*apiv1.Pod{pod("dns", bare(), inNamespace("kube-system"), created(2*time.Hour))},
			opts: withTimeout(strict, time.Hour), wantBlock: NotReplicated, blockedBy: "dns"},
		{name: "PDB in another namespace does not cover a kube-system pod", pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system"))},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 1, map[string]string{"app": "web"})},
			opts: strict, wantBlock: UnmovableKubeSystemPod, blockedBy: "dns"},

		{name: "PDB with no disruptions allowed blocks", pods: []*apiv1.Pod{pod("a")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 0, map[string]string{"app": "web"})},
			opts: strict, wantBlock: NotEnoughPdb, blockedBy: "a"},
		{name: "PDB blocks even safe-to-evict true", pods: []*apiv1.Pod{pod("a", annotated(SafeToEvictKey, "true"))},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 0, map[string]string{"app": "web"})},
			opts: strict, wantBlock: NotEnoughPdb, blockedBy: "a"},
		{name: "PDB allowing one disruption covers one pod", pods: []*apiv1.Pod{pod("a")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 1, map[string]string{"app": "web"})},
			opts: strict, wantMoved: []string{"a"}},
		{name: "PDB allowing one disruption, two pods on the node", pods: []*apiv1.Pod{pod("a"), pod("b")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 1, map[string]string{"app": "web"})},
			opts: strict, wantBlock: NotEnoughPdb, blockedBy: "b"},
		{name: "budgets left to eviction: an exhausted PDB still covers a kube-system pod",
			pods: []*apiv1.Pod{pod("dns", inNamespace("kube-system")), pod("dns2", inNamespace("kube-system"))},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kube-system", 0, map[string]string{"app": "web"})},
			opts: Options{SkipNodesWithSystemPods: true, BudgetsLeftToEviction: true}, wantMoved: []string{"dns", "dns2"}},
		{name: "PDB selecting other pods does not block", pods: []*apiv1.Pod{pod("a")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", 0, map[string]string{"app": "db"})},
			opts: strict, wantMoved: []string{"a"}},
		{name: "PDB in another namespace does not block", pods: []*apiv1.Pod{pod("a")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("other", 0, map[string]string{"app": "web"})},
			opts: strict, wantMoved: []string{"a"}},

		{name: "completed pods are skipped", pods: []*apiv1.Pod{pod("done", bare(), phase(apiv1.PodSucceeded)), pod("failed", bare(), phase(apiv1.PodFailed))},
			opts: strict, wantMoved: nil},
		{name: "long-terminating pod is skipped", pods: []*apiv1.Pod{pod("gone", bare(), deleting(2*time.Minute))},
			opts: strict, wantMoved: nil},
		{name: "recently terminating pod still counts", pods: []*apiv1.Pod{pod("going", bare(), deleting(10*time.Second))},
			opts: strict, wantBlock: NotReplicated, blockedBy: "going"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			moved, blocking := PodsToMove(tc.pods, tc.pdbs, tc.opts, now)
			if tc.wantBlock != NoReason {
				if blocking == nil {
					t.Fatalf("want blocked by %s (%s), got moved %v", tc.blockedBy, tc.wantBlock, names(moved))
				}
				if blocking.Reason != tc.wantBlock || blocking.Pod.Name != tc.blockedBy {
					t.Errorf("blocked by %s (%s), want %s (%s)", blocking.Pod.Name, blocking.Reason, tc.blockedBy, tc.wantBlock)
				}
				if moved != nil {
					t.Errorf("a blocked node has nothing to move, got %v", names(moved))
				}
				return
			}
			if blocking != nil {
				t.Fatalf("unexpectedly blocked by %s (%s)", blocking.Pod.Name, blocking.Reason)
			}
			if got := names(moved); !slices.Equal(got, tc.wantMoved) {
				t.Errorf("moved %v, want %v", got, tc.wantMoved)
			}
		})
	}
}

func TestControllerReplicas(t *testing.T) {
	lookup := func(ns string, ref metav1.OwnerReference) (int32, bool) {
		switch ref.Name {
		case "small":
			return 1, true
		case "big":
			return 5, true
		}
		return 0, false
	}
	opts := strict
	opts.MinReplicaCount = 3
	opts.ControllerReplicas = lookup
	tests := []struct {
		name string
		pod  *apiv1.Pod
		want BlockingPodReason
	}{
		{"enough replicas", pod("a", owned("ReplicaSet", "big")), NoReason},
		{"too few replicas", pod("a", owned("ReplicaSet", "small")), MinReplicasReached},
		{"StatefulSet is not held to MinReplicaCount", pod("a", owned("StatefulSet", "small")), NoReason},
		{"controller gone", pod("a", owned("ReplicaSet", "deleted")), ControllerNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, blocking := PodsToMove([]*apiv1.Pod{tc.pod}, nil, opts, now)
			got := NoReason
			if blocking != nil {
				got = blocking.Reason
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// Without a lookup, neither check applies.
	if _, blocking := PodsToMove([]*apiv1.Pod{pod("a", owned("ReplicaSet", "deleted"))}, nil, strict, now); blocking != nil {
		t.Errorf("without ControllerReplicas: blocked by %s", blocking.Reason)
	}
}

// The flags select the rules: each flag, changed from its default, changes
// what one pod does to its node.
func TestNewOptionsFromFlags(t *testing.T) {
	oneReplica := func(string, metav1.OwnerReference) (int32, bool) { return 1, true }
	tests := []struct {
		name       string
		flags      func(*config.AutoscalingOptions)
		pod        *apiv1.Pod
		want       BlockingPodReason
		wantMissed BlockingPodReason // with the flag at its default
	}{
		{"--skip-nodes-with-local-storage", func(o *config.AutoscalingOptions) { o.SkipNodesWithLocalStorage = false },
			pod("a", volume(emptyDir("data", ""))), NoReason, LocalStorageRequested},
		{"--skip-nodes-with-system-pods", func(o *config.AutoscalingOptions) { o.SkipNodesWithSystemPods = false },
			pod("a", inNamespace("kube-system"), created(time.Minute)), NoReason, UnmovableKubeSystemPod},
		{"--blocking-system-pod-distruption-timeout", func(o *config.AutoscalingOptions) { o.BspDisruptionTimeout = time.Second },
			pod("a", inNamespace("kube-system"), created(time.Minute)), NoReason, UnmovableKubeSystemPod},
		{"--skip-nodes-with-custom-controller-pods", func(o *config.AutoscalingOptions) { o.SkipNodesWithCustomControllerPods = false },
			pod("a", owned("CronTab", "x")), NoReason, NotReplicated},
		{"--min-replica-count", func(o *config.AutoscalingOptions) { o.MinReplicaCount = 2 },
			pod("a"), MinReplicasReached, NoReason},
	}
	reason := func(o Options, p *apiv1.Pod) BlockingPodReason {
		if _, b := PodsToMove([]*apiv1.Pod{p}, nil, o, now); b != nil {
			return b.Reason
		}
		return NoReason
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flags := config.Defaults()
			if got := reason(NewOptions(flags, oneReplica), tc.pod); got != tc.wantMissed {
				t.Errorf("at the defaults: %s, want %s", got, tc.wantMissed)
			}
			tc.flags(&flags)
			if got := reason(NewOptions(flags, oneReplica), tc.pod); got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}

// Two nodes each holding one pod of a PDB that allows one disruption: the
// first node's removal spends the budget and the second is then blocked.
func TestSpendDisruptions(t *testing.T) {
	web := pdb("default", 1, map[string]string{"app": "web"})
	other := pdb("default", 2, map[string]string{"app": "db"})
	pdbs := []*policyv1.PodDisruptionBudget{web, other}

	first := []*apiv1.Pod{pod("web-1")}
	if _, blocking := PodsToMove(first, pdbs, strict, now); blocking != nil {
		t.Fatalf("first node blocked by %s", blocking.Reason)
	}
	left := SpendDisruptions(pdbs, first)
	if got := left[0].Status.DisruptionsAllowed; got != 0 {
		t.Errorf("web PDB has %d disruptions left, want 0", got)
	}
	if left[1] != other {
		t.Error("a PDB the pods do not match was copied or changed")
	}
	if web.Status.DisruptionsAllowed != 1 {
		t.Error("the caller's PDB was changed")
	}
	_, blocking := PodsToMove([]*apiv1.Pod{pod("web-2")}, left, strict, now)
	if blocking == nil || blocking.Reason != NotEnoughPdb {
		t.Fatalf("second node: blocking %v, want NotEnoughPdb", blocking)
	}
	// Spending more than is left stops at zero rather than going negative.
	if got := SpendDisruptions(left, []*apiv1.Pod{pod("web-2"), pod("web-3")})[0].Status.DisruptionsAllowed; got != 0 {
		t.Errorf("overspent budget = %d, want 0", got)
	}
	if got := SpendDisruptions(pdbs, nil); &got[0] != &pdbs[0] {
		t.Error("no pods: the slice should come back as it is")
	}
}

func TestBlockingPodReasonString(t *testing.T) {
	want := map[BlockingPodReason]string{
		NoReason: "NoReason", ControllerNotFound: "ControllerNotFound", MinReplicasReached: "MinReplicasReached",
		NotReplicated: "NotReplicated", LocalStorageRequested: "LocalStorageRequested",
		NotSafeToEvictAnnotation: "NotSafeToEvictAnnotation", UnmovableKubeSystemPod: "UnmovableKubeSystemPod",
		NotEnoughPdb: "NotEnoughPdb", UnexpectedError: "UnexpectedError", BlockingPodReason(99): "BlockingPodReason(99)",
	}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(r), r.String(), s)
		}
	}
}

func names(pods []*apiv1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
