package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the API (upstream's).
const (
	GroupName = "autoscaling.x-k8s.io"
	Version   = "v1beta1"
	Kind      = "CapacityBuffer"
	Plural    = "capacitybuffers"
)

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// CapacityBuffersResource is the buffers' REST resource (for dynamic clients).
var CapacityBuffersResource = SchemeGroupVersion.WithResource(Plural)

// APIVersion is the apiVersion field of these objects.
var APIVersion = SchemeGroupVersion.String()

// Resource qualifies a resource name with the group (the generated listers
// name it in their not-found errors).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// AddToScheme registers the types (for the typed client and event references).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Provisioning strategies, conditions and reasons (upstream's values:
// capacitybuffer/constants.go and processors/capacitybuffer).
const (
	// ActiveProvisioningStrategy means the autoscaler keeps the room provisioned
	// with virtual pods. The only strategy upstream's controller and
	// injector act on; buffers with any other are left to other controllers.
	ActiveProvisioningStrategy = "buffer.x-k8s.io/active-capacity"

	// ReadyForProvisioningCondition says whether the controller resolved the buffer's
	// pod shape and size (True), or could not (False, reason
	// NotReadyReason, the message says why).
	ReadyForProvisioningCondition = "ReadyForProvisioning"
	// ProvisioningCondition says whether the injector provisions the buffer's room
	// (True, FakePodsInjectedReason), or does not (False, a reason below).
	ProvisioningCondition = "Provisioning"

	AttributesSetSuccessfullyReason = "AttributesSetSuccessfully"
	// NotReadyReason is upstream's reason for ReadyForProvisioning=False.
	NotReadyReason = "error"

	NotReadyForProvisioningReason = "NotReadyForProvisioning"
	BufferIsEmptyReason           = "BufferIsEmpty"
	FailedToGetPodTemplateReason  = "FailedToGetPodTemplate"
	FailedToMakeFakePodsReason    = "FailedToMakeFakePods"
	FakePodsInjectedReason        = "FakePodsInjected"
)
