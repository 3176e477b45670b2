// Package v1 holds the ProvisioningRequest API (autoscaling.x-k8s.io/v1,
// the stored version), defined from upstream cluster-autoscaler's CRD:
// field names, validation, condition types, class names and annotation
// keys are upstream's, so Kueue's ProvisioningRequest admission check works
// unchanged.
//
// The Go types are the source of the rest: deep copies
// (zz_generated.deepcopy.go), the typed client, listers and informers
// (../client) and the CRD (deploy/crds) are generated from them by
// `make generate`.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1
