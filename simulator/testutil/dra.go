package testutil

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NvidiaDriver is the driver name NVIDIA's DRA driver publishes GPUs under.
const NvidiaDriver = "gpu.nvidia.com"

// DeviceClass returns a class selecting every device of driver, as the
// drivers' own classes do (a CEL selector on device.driver).
func DeviceClass(name, driver string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("class-" + name)},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
}

// NodeSlice returns the single slice driver publishes for node: a pool
// named after the node with devices gpu-0 ... gpu-<n-1>, each with a
// "model" attribute.
func NodeSlice(node, driver string, n int) *resourceapi.ResourceSlice {
	nodeName := node
	sl := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver, UID: types.UID("slice-" + node)},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: &nodeName,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
	model := "H100"
	for i := 0; i < n; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}},
		})
	}
	return sl
}

// Claim returns an unallocated claim in "default" asking for count devices
// of class.
func Claim(name, class string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("claim-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: deviceRequest(class, count)},
	}
}

func deviceRequest(class string, count int64) resourceapi.DeviceClaim {
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
		},
	}}}
}

// ClaimTemplate returns a ResourceClaimTemplate in "default" for count
// devices of class.
func ClaimTemplate(name, class string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("template-" + name)},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: deviceRequest(class, count)}},
	}
}

// Allocated returns a copy of claim allocated the named devices of the
// node's pool (as NodeSlice names them) and reserved for pods.
func Allocated(claim *resourceapi.ResourceClaim, node, driver string, devices []string, pods ...*apiv1.Pod) *resourceapi.ResourceClaim {
	c := claim.DeepCopy()
	alloc := &resourceapi.AllocationResult{NodeSelector: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
		MatchFields: []apiv1.NodeSelectorRequirement{{Key: "metadata.name", Operator: apiv1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: driver, Pool: node, Device: d,
		})
	}
	c.Status.Allocation = alloc
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// WithClaim makes the pod use the existing claim claimName (entry "gpu").
func WithClaim(p *apiv1.Pod, claimName string) *apiv1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, apiv1.PodResourceClaim{Name: "gpu", ResourceClaimName: &claimName})
	p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, apiv1.ResourceClaim{Name: "gpu"})
	return p
}

// WithClaimTemplate makes the pod ask for a claim from template (entry
// "gpu"); the claim does not exist until the resourceclaim controller
// creates it.
func WithClaimTemplate(p *apiv1.Pod, template string) *apiv1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, apiv1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &template})
	p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, apiv1.ResourceClaim{Name: "gpu"})
	return p
}

// ExtendedResourceClass is DeviceClass with spec.extendedResourceName set,
// as NVIDIA's chart publishes gpu.nvidia.com for nvidia.com/gpu: a pod
// asking for that resource is served a device of the class.
func ExtendedResourceClass(name, driver string, resourceName apiv1.ResourceName) *resourceapi.DeviceClass {
	c := DeviceClass(name, driver)
	n := string(resourceName)
	c.Spec.ExtendedResourceName = &n
	return c
}

// ExtendedResourceClaim returns the claim the scheduler creates for a pod
// whose extended resources DRA serves, allocated the named devices of the
// node's pool and reserved for the pod, and sets the pod's
// status.extendedResourceClaimStatus to name it, as the scheduler's PreBind
// does.
func ExtendedResourceClaim(p *apiv1.Pod, class *resourceapi.DeviceClass, node, driver string, devices []string) *resourceapi.ResourceClaim {
	ctrl := true
	c := Claim(p.Name+"-extended-resources-abcde", class.Name, int64(len(devices)))
	c.Namespace = p.Namespace
	c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &ctrl}}
	c.Spec.Devices.Requests[0].Name = "container-0-request-0"
	c = Allocated(c, node, driver, devices, p)
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].Request = "container-0-request-0"
	}
	p.Status.ExtendedResourceClaimStatus = &apiv1.PodExtendedResourceClaimStatus{
		ResourceClaimName: c.Name,
		RequestMappings: []apiv1.ContainerExtendedResourceRequest{{
			ContainerName: p.Spec.Containers[0].Name, ResourceName: *class.Spec.ExtendedResourceName, RequestName: "container-0-request-0",
		}},
	}
	return c
}
