package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningRequest asks for capacity for a set of pods: the autoscaler
// checks it exists (check-capacity) or creates it all or nothing
// (best-effort-atomic-scale-up), says so in the conditions, and books it for
// the pods that consume the request.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=provisioningrequests,scope=Namespaced,shortName=provreq;provreqs
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is what is asked for. It cannot change: to ask for something
	// else, delete the request and create another.
	// +required
	Spec ProvisioningRequestSpec `json:"spec"`
	// Status is what the autoscaler found or did.
	// +optional
	Status ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestList is a list of requests.
//
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequest `json:"items"`
}

// ProvisioningRequestSpec is immutable once created.
type ProvisioningRequestSpec struct {
	// PodSets: the groups of pods to provision for (1 to 32).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName selects how the capacity is provided:
	// check-capacity.autoscaling.x-k8s.io finds room in the cluster as it
	// is; best-effort-atomic-scale-up.autoscaling.x-k8s.io adds nodes for
	// every pod or none, retried until the ValidUntilSeconds parameter runs
	// out. Other classes are left to other controllers.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters the class may read: ValidUntilSeconds
	// (best-effort-atomic-scale-up), noRetry (check-capacity).
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is a class parameter's value, at most 255 characters.
// +kubebuilder:validation:MaxLength=255
type Parameter string

// PodSet is Count pods like the PodTemplate PodTemplateRef names.
type PodSet struct {
	// PodTemplateRef names the PodTemplate (same namespace) of the pods that
	// will consume the capacity; what the scheduler reads (node selector,
	// tolerations) must match those pods.
	// +required
	PodTemplateRef Reference `json:"podTemplateRef"`
	// Count is the number of pods.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

// Reference names an object in the request's namespace.
type Reference struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is what the autoscaler reports.
type ProvisioningRequestStatus struct {
	// Conditions: Accepted, Provisioned, Failed, BookingExpired,
	// CapacityRevoked (see the constants below).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningClassDetails are class-specific values for the user.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	ProvisioningClassDetails map[string]Detail `json:"provisioningClassDetails,omitempty"`
}

// Detail is a class-specific status value, at most 32768 characters.
// +kubebuilder:validation:MaxLength=32768
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
