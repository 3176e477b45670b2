package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
)

// ProvisioningRequest is v1.ProvisioningRequest under its older version.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=provisioningrequests,scope=Namespaced,shortName=provreq;provreqs
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1beta1 ProvisioningRequest is deprecated; use autoscaling.x-k8s.io/v1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is what is asked for. It cannot change: to ask for something
	// else, delete the request and create another.
	// +required
	Spec v1.ProvisioningRequestSpec `json:"spec"`
	// Status is what the autoscaler found or did.
	// +optional
	Status v1.ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestList is a list of requests.
//
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequest `json:"items"`
}
