package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// CapacityBuffer is v1beta1.CapacityBuffer under its older version.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy",description="How the room is provisioned."
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name",description="The PodTemplate the placeholder pods are made from."
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="How many placeholder pods the buffer holds room for."
// +kubebuilder:printcolumn:name="ConditionsType",type="string",JSONPath=".status.conditions[*].type",description="The conditions' types."
// +kubebuilder:printcolumn:name="ConditionsStatus",type="string",JSONPath=".status.conditions[*].status",description="The conditions' statuses."
// +kubebuilder:printcolumn:name="ConditionsReason",type="string",JSONPath=".status.conditions[*].reason",description="The conditions' reasons."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the buffer was created."
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the room asked for.
	// +required
	Spec v1beta1.CapacityBufferSpec `json:"spec"`
	// Status is the buffer as the controller resolved it.
	// +optional
	Status v1beta1.CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferList is a list of buffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
