package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// The objects below are made as Kueue's ProvisioningRequest admission check
// (pkg/controller/admissionchecks/provisioning) makes them for a Job's
// workload: a request named <workload>-<check>-<attempt> with the
// ProvisioningRequestConfig's class and parameters, then one PodTemplate
// ppt-<request>-<podset> per pod set, copied from the Job's pod template and
// owned by the request. When the request is Provisioned, Kueue admits the
// workload: it adds the two consume annotations to the Job's pod template and
// unsuspends the Job. Left out: the request's owner reference to the Workload
// (no Kueue here) and the flavor's node selector merge (one pool per test).

// provreqCheck is the admission check's name; Kueue's workload of Job "train"
// is job-train-<hash>.
const (
	provreqCheck    = "doks-prov"
	provreqWorkload = "job-train-8c7d2"
	provreqPodSet   = "main"
)

func (s *scenario) provisioningRequests() dynamic.ResourceInterface {
	return s.resource(v1.ProvisioningRequestsResource)
}

func (s *scenario) provisioningRequest(name string) *v1.ProvisioningRequest {
	s.t.Helper()
	pr := &v1.ProvisioningRequest{}
	s.getInto(s.provisioningRequests(), name, pr)
	return pr
}

// suspendedJob creates Job "train" of n pods of cpu each on pool, suspended
// as Kueue keeps it until its admission checks are Ready, and returns it as
// the API server stored it (the pod template Kueue copies).
func (s *scenario) suspendedJob(n int32, cpu, pool string) *batchv1.Job {
	s.t.Helper()
	tmpl := newDeployment(s.ns, "train", 1, cpu, withNodeSelector(nodeagent.LabelNodePool, pool)).Spec.Template
	tmpl.Labels = nil // the Job controller labels its pods
	tmpl.Spec.RestartPolicy = apiv1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: s.ns},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(n), Completions: ptr.To(n), Suspend: ptr.To(true), Template: tmpl}}
	created, err := s.kube.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return created
}

// kueueRequest creates attempt 1 of the admission check's request for the
// Job's workload, of class with params, asking for count pods like the
// Job's, in Kueue's order: the request, then its PodTemplate.
func (s *scenario) kueueRequest(job *batchv1.Job, class string, params map[string]v1.Parameter, count int32) string {
	s.t.Helper()
	name := fmt.Sprintf("%s-%s-%d", provreqWorkload, provreqCheck, 1)
	ppt := fmt.Sprintf("ppt-%s-%s", name, provreqPodSet)
	pr := &v1.ProvisioningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params,
			PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: ppt}, Count: count}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pr)
	if err != nil {
		s.t.Fatal(err)
	}
	created, err := s.provisioningRequests().Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("ProvisioningRequest %s: %v", name, err)
	}
	pt := &apiv1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: ppt, Namespace: s.ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Name: name, UID: created.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}},
		Template: *job.Spec.Template.DeepCopy(),
	}
	if _, err := s.kube.CoreV1().PodTemplates(s.ns).Create(s.ctx, pt, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("PodTemplate %s: %v", ppt, err)
	}
	return name
}

// admitJob does what Kueue does once the request is Provisioned: the Job's
// pods consume the request (podSetUpdates' annotations) and it starts.
func (s *scenario) admitJob(name, request, class string) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := s.kube.BatchV1().Jobs(s.ns).Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if job.Spec.Template.Annotations == nil {
			job.Spec.Template.Annotations = map[string]string{}
		}
		job.Spec.Template.Annotations[v1.ProvisioningRequestPodAnnotationKey] = request
		job.Spec.Template.Annotations[v1.ProvisioningClassPodAnnotationKey] = class
		job.Spec.Suspend = ptr.To(false)
		_, err = s.kube.BatchV1().Jobs(s.ns).Update(s.ctx, job, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatalf("admitting Job %s: %v", name, err)
	}
}

// jobRunning checks that n pods of the Job run Ready.
func (s *scenario) jobRunning(name string, n int) func() error {
	return func() error {
		l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range l.Items {
			if isReady(&p) {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("Job %s: %d of %d pods running", name, ready, len(l.Items))
		}
		return nil
	}
}

// conditionIs checks that the request has condition typ with status and reason.
func (s *scenario) conditionIs(name, typ string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		pr := s.provisioningRequest(name)
		c := apimeta.FindStatusCondition(pr.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("request %s: %s is %+v, want %s/%s (conditions %+v)", name, typ, c, status, reason, pr.Status.Conditions)
		}
		return nil
	}
}

// updatesAre checks that the simulator received n UpdateNodePool calls.
func (s *scenario) updatesAre(n int) func() error {
	return func() error {
		if got := s.sb.DOKS.RequestCount(doks.OpUpdateNodePool); got != n {
			return fmt.Errorf("%d UpdateNodePool calls, want %d", got, n)
		}
		return nil
	}
}

// backdateProvisioned moves the request's Provisioned condition d into the
// past, as if it had been provisioned that long ago: the booking's 10
// minutes (upstream's fixed time, no flag) run out without a 10-minute test.
func (s *scenario) backdateProvisioned(name string, d time.Duration) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr := s.provisioningRequest(name)
		c := apimeta.FindStatusCondition(pr.Status.Conditions, v1.Provisioned)
		if c == nil {
			return fmt.Errorf("no Provisioned condition")
		}
		c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(-d))
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pr)
		if err != nil {
			return err
		}
		_, err = s.provisioningRequests().UpdateStatus(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatalf("backdating %s: %v", name, err)
	}
}

// A best-effort-atomic request for 6 pods of one node each, pool max 8: one
// UpdateNodePool of +6 and Provisioned=True. While those nodes boot, an
// unrelated pending pod that would fit one of them does not take the booked
// room: it scales up by one of its own. Kueue then starts the Job; its six
// pods run on the booked nodes with no further scale-up.
func TestProvisioningRequestAtomicScaleUp(t *testing.T) {
	// Droplets boot for 8s: the unrelated pod below is still pending, not
	// placed on a booted node, when the autoscaler looks at it.
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("train", 0, 0, 8)}, bootDelay: 8 * time.Second})
	s.startAutoscaler("--enable-provisioning-requests")
	// Running already: the request's event may wake the loop before its
	// PodTemplate exists.
	job := s.suspendedJob(6, bigPod, "train")
	class := v1.ProvisioningClassBestEffortAtomicScaleUp
	pr := s.kueueRequest(job, class, nil, 6)

	s.eventually("Provisioned=True", 60*time.Second, s.conditionIs(pr, v1.Provisioned, metav1.ConditionTrue, "CapacityIsProvisioned"))
	if err := s.conditionIs(pr, v1.Accepted, metav1.ConditionTrue, "Accepted")(); err != nil {
		t.Error(err)
	}
	if err := s.updatesAre(1)(); err != nil {
		t.Fatal(err)
	}
	if m := s.maxTarget("train"); m != 6 {
		t.Fatalf("the one update took the pool to %d, want 6", m)
	}

	// The booked room on the six booting nodes is not the unrelated pod's.
	s.deploy("web", 1, bigPod, withNodeSelector(nodeagent.LabelNodePool, "train"))
	s.waitTarget("train", 7, 60*time.Second)

	s.admitJob("train", pr, class)
	s.eventually("the Job's 6 pods running", 90*time.Second, s.jobRunning("train", 6))
	s.waitRunning("web", 1, 60*time.Second)
	s.holds("no further scale-up", 3*time.Second, func() error {
		if err := s.updatesAre(2)(); err != nil {
			return err
		}
		return s.targetIs("train", 7)()
	})
	if m := s.maxTarget("train"); m != 7 {
		t.Errorf("pool reached %d nodes, want 7 (the request's 6 and web's 1)", m)
	}
}

// A best-effort-atomic request that cannot fit: 6 pods of one node each,
// pool max 4. Nothing is asked of DOKS, not even the 4 that would fit, and
// the request is Provisioned=False.
func TestProvisioningRequestAtomicCannotFit(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("train", 0, 0, 4)}})
	s.startAutoscaler("--enable-provisioning-requests")
	job := s.suspendedJob(6, bigPod, "train")
	pr := s.kueueRequest(job, v1.ProvisioningClassBestEffortAtomicScaleUp, nil, 6)

	s.eventually("Provisioned=False", 60*time.Second, s.conditionIs(pr, v1.Provisioned, metav1.ConditionFalse, "CapacityIsNotFound"))
	if c := apimeta.FindStatusCondition(s.provisioningRequest(pr).Status.Conditions, v1.Provisioned); c.Message != "Capacity is not found, CA will try to find it later." {
		t.Errorf("Provisioned message %q, want upstream's", c.Message)
	}
	s.holds("no UpdateNodePool", 4*time.Second, s.updatesAre(0))
	// The request's events say why: the outcome, and for its pods that the
	// pool cannot host them all.
	var why []string
	for _, reason := range []string{"CapacityIsNotFound", "NotTriggerScaleUp"} {
		for _, e := range s.events(reason) {
			if e.InvolvedObject.Kind == v1.Kind && e.InvolvedObject.Name == pr {
				why = append(why, reason+": "+e.Message)
			}
		}
	}
	if all := strings.Join(why, "\n"); !strings.Contains(all, "CapacityIsNotFound: Provisioned=False") || !strings.Contains(all, "all-or-nothing") {
		t.Errorf("events on the request:\n%s\nwant the CapacityIsNotFound outcome and the all-or-nothing reason", all)
	}
	if m := s.maxTarget("train"); m != 0 {
		t.Errorf("pool reached %d nodes, want 0", m)
	}
}

// check-capacity on a cluster with room: two empty nodes fit the request's
// two pods. Provisioned=True with no scale-up, and the booked room is held
// against scale-down (empty nodes otherwise go after the 5s unneeded time)
// until the booking expires; then BookingExpired=True and the nodes go.
func TestProvisioningRequestCheckCapacityBooksRoom(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("batch", 2, 0, 4)}})
	s.waitNodes("batch", 2, 60*time.Second)
	// The request comes first here: the empty nodes would go before it.
	job := s.suspendedJob(2, bigPod, "batch")
	pr := s.kueueRequest(job, v1.ProvisioningClassCheckCapacity, map[string]v1.Parameter{"ValidUntilSeconds": "600"}, 2)
	s.startAutoscaler("--enable-provisioning-requests")

	s.eventually("Provisioned=True", 60*time.Second, s.conditionIs(pr, v1.Provisioned, metav1.ConditionTrue, "CapacityIsFound"))
	s.holds("the booked room kept, past --scale-down-unneeded-time", 10*time.Second, func() error {
		if tainted := s.taintedNodes(); len(tainted) > 0 {
			return fmt.Errorf("nodes tainted for deletion: %v", tainted)
		}
		// Nor marked a deletion candidate: PreferNoSchedule would steer the
		// Job's pods away from their room.
		if soft := s.nodesWithTaint(clusterstate.DeletionCandidateTaint); len(soft) > 0 {
			return fmt.Errorf("booked nodes soft-tainted: %v", soft)
		}
		if err := s.updatesAre(0)(); err != nil {
			return err
		}
		return s.targetIs("batch", 2)()
	})

	// Provisioned 10 minutes ago: the booking ends, the room is released.
	s.backdateProvisioned(pr, 10*time.Minute)
	s.eventually("BookingExpired=True", 30*time.Second, s.conditionIs(pr, v1.BookingExpired, metav1.ConditionTrue, "CapacityReservationTimeExpired"))
	s.waitTarget("batch", 0, 60*time.Second)
}

// check-capacity without room: the one node is full. Provisioned=False and
// no scale-up (this class never scales up).
func TestProvisioningRequestCheckCapacityNoRoom(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("batch", 1, 1, 4)}})
	s.deploy("fill", 1, bigPod, withNodeSelector(nodeagent.LabelNodePool, "batch"))
	s.waitRunning("fill", 1, 60*time.Second)
	s.startAutoscaler("--enable-provisioning-requests")
	job := s.suspendedJob(2, bigPod, "batch")
	pr := s.kueueRequest(job, v1.ProvisioningClassCheckCapacity, nil, 2)

	s.eventually("Provisioned=False", 60*time.Second, s.conditionIs(pr, v1.Provisioned, metav1.ConditionFalse, "CapacityIsNotFound"))
	s.holds("no scale-up", 4*time.Second, func() error {
		if err := s.updatesAre(0)(); err != nil {
			return err
		}
		return s.targetIs("batch", 1)()
	})
}

// Without --enable-provisioning-requests a request is left alone (no
// status) and its consumer pods are ordinary pending pods: they scale up
// as any others.
func TestProvisioningRequestIgnoredWithoutTheFlag(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("train", 0, 0, 8)}})
	s.startAutoscaler()
	job := s.suspendedJob(2, bigPod, "train")
	class := v1.ProvisioningClassBestEffortAtomicScaleUp
	pr := s.kueueRequest(job, class, nil, 2)
	s.admitJob("train", pr, class)
	s.waitTarget("train", 2, 60*time.Second)
	s.eventually("the Job's 2 pods running", 60*time.Second, s.jobRunning("train", 2))
	if c := s.provisioningRequest(pr).Status.Conditions; len(c) > 0 {
		t.Errorf("conditions written without the flag: %+v", c)
	}
}
