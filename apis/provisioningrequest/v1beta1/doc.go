// Package v1beta1 is ProvisioningRequest's older version, still served
// (deprecated, not stored) so that clients that name it keep working, as
// upstream's CRD serves it. It has the v1 schema; the autoscaler reads v1
// only, and the API server converts between the two by changing
// apiVersion. It exists for the generated CRD.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
