package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer asks the autoscaler to keep room for a number of pods of a
// given shape without any pod running in it: the autoscaler provisions nodes
// for placeholder pods that the scheduler never sees.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
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
	Spec CapacityBufferSpec `json:"spec"`
	// Status is the buffer as the controller resolved it.
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names a workload of the buffer's namespace whose pod template
// (and replica count, for percentage) the buffer follows.
type ScalableRef struct {
	// APIGroup of the workload: "apps" (Deployment, ReplicaSet,
	// StatefulSet), "batch" (Job); empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload, such as Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the workload.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ResourceName mirrors core/v1's, as upstream's API does.
type ResourceName string

// ResourceList mirrors core/v1's.
type ResourceList map[ResourceName]resource.Quantity

// CapacityBufferSpec is what the user asks for: a pod shape (podTemplateRef
// or scalableRef, not both) and a size (replicas, percentage of the
// scalable object's replicas, limits; the smallest of those set wins).
//
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="podTemplateRef needs replicas or limits"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="set podTemplateRef or scalableRef, not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the room is kept. With the default,
	// buffer.x-k8s.io/active-capacity, the autoscaler provisions nodes for
	// the buffer's placeholder pods; other strategies are left to other
	// controllers.
	// +optional
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names the PodTemplate (same namespace) one placeholder
	// pod is made from.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names a workload (same namespace) whose pod template one
	// placeholder pod is made from.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is how many placeholder pods to keep room for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the scalableRef workload's replicas to keep room for,
	// rounded up, at least 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits caps the placeholder pods' total requests; alone, the buffer
	// holds as many pods as fit under them.
	// +optional
	Limits *ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is the buffer as the controller resolved it.
type CapacityBufferStatus struct {
	// PodTemplateRef names the PodTemplate the placeholder pods are made
	// from, when it is one (see docs/capacity-buffers.md for scalableRef
	// buffers).
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is how many placeholder pods the buffer holds room for.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of the template the status
	// was resolved from.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning (the controller resolved the buffer)
	// and Provisioning (the autoscaler keeps its room).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy the status was resolved for.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of buffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}

// Strategy returns the buffer's provisioning strategy, the default when the
// field is unset or empty (as upstream maps it).
func (b *CapacityBuffer) Strategy() string {
	if b.Spec.ProvisioningStrategy == nil || *b.Spec.ProvisioningStrategy == "" {
		return ActiveProvisioningStrategy
	}
	return *b.Spec.ProvisioningStrategy
}
