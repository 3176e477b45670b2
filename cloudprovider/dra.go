package cloudprovider

import (
	resourcelisters "k8s.io/client-go/listers/resource/v1"
)

// DRAListers are the cluster's Dynamic Resource Allocation objects as the
// autoscaler's informers hold them.
type DRAListers struct {
	DeviceClasses  resourcelisters.DeviceClassLister
	ResourceSlices resourcelisters.ResourceSliceLister
}

// DRAAware is implemented by a provider whose node templates depend on the
// DRA drivers the cluster runs: a DigitalOcean GPU pool's new nodes get
// their GPUs as DRA devices when the vendor's DRA driver runs, as an
// extended resource otherwise. The autoscaler hands the provider its
// listers once, before its first iteration, so that the provider reads the
// cluster without importing the core or watching anything itself (upstream
// passes its informer factory to the provider builders for the same
// reason).
type DRAAware interface {
	SetDRAListers(DRAListers)
}
