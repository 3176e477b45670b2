package report

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/provisioningrequest"
)

// A consumer pod is told it triggers no scale-up; a request written gets
// an event telling its outcome, a Warning for one that went wrong.
func TestProvisioningRequestEvents(t *testing.T) {
	f := newFixture(t, nil)
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: "job-prov-1", Namespace: "ns"}}
	consumer := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ns"}}
	f.r.ProvisioningRequestConsumer(provisioningrequest.Consumer{Pod: consumer, Request: "job-prov-1"})
	f.r.ProvisioningRequestWritten(provisioningrequest.StatusUpdate{Request: pr, Outcome: metav1.Condition{Type: v1.BookingExpired, Status: metav1.ConditionTrue,
		Reason: provisioningrequest.CapacityReservationTimeExpiredReason, Message: provisioningrequest.CapacityReservationTimeExpiredMsg}})
	f.r.ProvisioningRequestWritten(provisioningrequest.StatusUpdate{Request: pr, Outcome: metav1.Condition{Type: v1.Provisioned, Status: metav1.ConditionTrue,
		Reason: provisioningrequest.CapacityIsFoundReason, Message: provisioningrequest.CapacityIsFoundMsg}})
	f.r.ProvisioningRequestWritten(provisioningrequest.StatusUpdate{Request: pr, Outcome: metav1.Condition{Type: v1.Provisioned, Status: metav1.ConditionFalse,
		Reason: provisioningrequest.CapacityIsNotFoundReason, Message: provisioningrequest.CapacityIsNotFoundMsg}})
	got := f.drain()
	want := []string{
		"Normal NotTriggerScaleUp Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest ns/job-prov-1",
		"Warning " + provisioningrequest.CapacityReservationTimeExpiredReason + " BookingExpired=True: " + provisioningrequest.CapacityReservationTimeExpiredMsg,
		"Normal " + provisioningrequest.CapacityIsFoundReason + " Provisioned=True: " + provisioningrequest.CapacityIsFoundMsg,
		"Warning " + provisioningrequest.CapacityIsNotFoundReason + " Provisioned=False: " + provisioningrequest.CapacityIsNotFoundMsg,
	}
	wantEvents(t, got, want...)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}
