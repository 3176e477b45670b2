// Package v1beta1 holds the CapacityBuffer API (autoscaling.x-k8s.io/v1beta1)
// as this project reads and writes it. The types are the project's own,
// written from upstream's CRD (cluster-autoscaler 1.36.1,
// apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml, the same file as
// deploy/crds/): field names and JSON tags match it, so objects written by
// upstream's tools or controller read the same here.
package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer asks the autoscaler to keep room for a number of pods of a
// given shape without any pod running in it.
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CapacityBufferSpec   `json:"spec"`
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	Name string `json:"name"`
}

// ScalableRef names a workload of the buffer's namespace whose pod template
// (and replica count, for percentage) the buffer follows.
type ScalableRef struct {
	// APIGroup: "apps" (Deployment, ReplicaSet, StatefulSet), "batch" (Job);
	// empty for the core group.
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// ResourceName mirrors core/v1's, as upstream's API does.
type ResourceName string

// ResourceList mirrors core/v1's.
type ResourceList map[ResourceName]resource.Quantity

// CapacityBufferSpec is what the user asks for: a pod shape (podTemplateRef
// or scalableRef, exactly one) and a size (replicas, percentage of the
// scalable object's replicas, limits; the smallest of those set wins).
type CapacityBufferSpec struct {
	// ProvisioningStrategy defaults to ActiveProvisioningStrategy (the CRD
	// sets the default).
	ProvisioningStrategy *string         `json:"provisioningStrategy,omitempty"`
	PodTemplateRef       *LocalObjectRef `json:"podTemplateRef,omitempty"`
	ScalableRef          *ScalableRef    `json:"scalableRef,omitempty"`
	Replicas             *int32          `json:"replicas,omitempty"`
	Percentage           *int32          `json:"percentage,omitempty"`
	Limits               *ResourceList   `json:"limits,omitempty"`
}

// CapacityBufferStatus is the buffer as the controller resolved it.
type CapacityBufferStatus struct {
	// PodTemplateRef: the PodTemplate the buffer's pods are made from, when
	// it is one (see docs/capacity-buffers.md for scalableRef buffers).
	PodTemplateRef        *LocalObjectRef    `json:"podTemplateRef,omitempty"`
	Replicas              *int32             `json:"replicas,omitempty"`
	PodTemplateGeneration *int64             `json:"podTemplateGeneration,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
	ProvisioningStrategy  *string            `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of buffers.
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
