// Package v1 holds the ProvisioningRequest API (autoscaling.x-k8s.io/v1),
// defined from upstream cluster-autoscaler's CRD: field names, condition
// types, class names and annotation keys are upstream's, so Kueue's
// ProvisioningRequest admission check works unchanged. Objects are read and
// written as JSON through client-go's dynamic client (client.go).
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and version of the API; Resource is the plural the API server
// serves it under.
var (
	SchemeGroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1"}
	Resource           = SchemeGroupVersion.WithResource("provisioningrequests")
)

// Kind of the object.
const Kind = "ProvisioningRequest"

// ProvisioningRequest asks for capacity for a set of pods.
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProvisioningRequestSpec   `json:"spec"`
	Status            ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestSpec is immutable once created.
type ProvisioningRequestSpec struct {
	// PodSets: groups of pods to provision for (1 to 32).
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName selects how the capacity is provided.
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters the class may read (at most 100, values ≤ 255 chars).
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is a class parameter's value.
type Parameter string

// PodSet is Count pods like the PodTemplate PodTemplateRef names (same
// namespace).
type PodSet struct {
	PodTemplateRef Reference `json:"podTemplateRef"`
	Count          int32     `json:"count"`
}

// Reference names an object in the request's namespace.
type Reference struct {
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is what the autoscaler reports.
type ProvisioningRequestStatus struct {
	Conditions               []metav1.Condition `json:"conditions,omitempty"`
	ProvisioningClassDetails map[string]Detail  `json:"provisioningClassDetails,omitempty"`
}

// Detail is a class-specific status value.
type Detail string

// Condition types.
const (
	// Accepted means the autoscaler will try to provide the capacity.
	Accepted = "Accepted"
	// BookingExpired means the capacity was Provisioned and its booking ran out.
	BookingExpired = "BookingExpired"
	// CapacityRevoked means the capacity provided is no longer valid.
	CapacityRevoked = "CapacityRevoked"
	// Provisioned means the capacity is there (or has been asked for).
	Provisioned = "Provisioned"
	// Failed means the capacity cannot be provided.
	Failed = "Failed"
)

// Classes this autoscaler serves, and the annotations of the pods that
// consume a request.
const (
	ProvisioningClassCheckCapacity           = "check-capacity.autoscaling.x-k8s.io"
	ProvisioningClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

	ProvisioningRequestPodAnnotationKey = "autoscaling.x-k8s.io/consume-provisioning-request"
	ProvisioningClassPodAnnotationKey   = "autoscaling.x-k8s.io/provisioning-class-name"
	// The older spellings, still honoured.
	DeprecatedProvisioningRequestPodAnnotationKey = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
	DeprecatedProvisioningClassPodAnnotationKey   = "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)
