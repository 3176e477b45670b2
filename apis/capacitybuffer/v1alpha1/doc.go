// Package v1alpha1 is CapacityBuffer's first version, still served
// (deprecated, not stored) so that clusters whose objects or manifests
// name it keep working, as upstream's CRD serves it. It has the v1beta1
// schema; the autoscaler reads v1beta1 only, and the API server converts
// between the two by changing apiVersion. It exists for the generated CRD.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1alpha1
