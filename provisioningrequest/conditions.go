package provisioningrequest

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
)

// Reasons and messages of the conditions, as upstream writes them.
const (
	AcceptedReason                       = "Accepted"
	AcceptedMsg                          = "ProvisioningRequest is accepted by ClusterAutoscaler"
	CapacityIsNotFoundReason             = "CapacityIsNotFound"
	CapacityIsNotFoundMsg                = "Capacity is not found, CA will try to find it later."
	CapacityIsNotFoundNoRetryMsg         = "CA could not find requested capacity"
	CapacityIsFoundReason                = "CapacityIsFound"
	CapacityIsFoundMsg                   = "Capacity is found in the cluster"
	CapacityIsProvisionedReason          = "CapacityIsProvisioned"
	CapacityIsProvisionedMsg             = "Capacity is found in the cluster"
	FailedToCheckCapacityReason          = "FailedToCheckCapacity"
	FailedToCheckCapacityMsg             = "Failed to check pre-existing capacity in the cluster"
	FailedToCreatePodsReason             = "FailedToCreatePods"
	FailedToBookCapacityReason           = "FailedToBookCapacity"
	CapacityReservationTimeExpiredReason = "CapacityReservationTimeExpired"
	CapacityReservationTimeExpiredMsg    = "Capacity reservation time is expired"
	ExpiredReason                        = "Expired"
	ExpiredMsg                           = "ProvisioningRequest is expired"
)

// NoRetryParameter is the request parameter that, set to "true", makes a
// check-capacity request that finds no room Failed instead of
// Provisioned=False (Kueue then retries at once).
const NoRetryParameter = "noRetry"

// setCondition sets condition t on pr with meta.SetStatusCondition, then
// stamps it now even when its status did not change: as upstream, a
// request's retry backoff (available) and its deletion a week after it
// finished (finishedBefore) count from the condition's last write, where
// SetStatusCondition alone would keep the time of its last status change.
func setCondition(pr *v1.ProvisioningRequest, t string, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: pr.Generation,
	})
	apimeta.FindStatusCondition(pr.Status.Conditions, t).LastTransitionTime = now
}

// isTrue says whether pr has condition t with status True.
func isTrue(pr *v1.ProvisioningRequest, t string) bool {
	return apimeta.IsStatusConditionTrue(pr.Status.Conditions, t)
}

// booked says whether pr's room is booked: Provisioned, and neither Failed
// nor BookingExpired.
func booked(pr *v1.ProvisioningRequest) bool {
	return isTrue(pr, v1.Provisioned) && !isTrue(pr, v1.Failed) && !isTrue(pr, v1.BookingExpired)
}

// terminal reports whether nothing more will be done for pr.
func terminal(pr *v1.ProvisioningRequest) bool {
	return isTrue(pr, v1.Failed) || isTrue(pr, v1.Provisioned)
}
