// Package v1beta1 holds the CapacityBuffer API (autoscaling.x-k8s.io/v1beta1,
// the stored version), as this project reads and writes it. Field names,
// JSON tags and validation are upstream cluster-autoscaler 1.36.1's, so
// objects written by upstream's tools or controller read the same here.
//
// The Go types are the source of the rest: deep copies
// (zz_generated.deepcopy.go), the typed client, listers and informers
// (../client) and the CRD (deploy/crds) are generated from them by
// `make generate`.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
