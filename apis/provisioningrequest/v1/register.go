package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1"}

// ProvisioningRequestsResource is the plural the API server serves requests
// under (for dynamic clients).
var ProvisioningRequestsResource = SchemeGroupVersion.WithResource("provisioningrequests")

// Kind of the object.
const Kind = "ProvisioningRequest"

// Resource qualifies a resource name with the group (the generated listers
// name it in their not-found errors).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// AddToScheme registers the types (for the typed client and event references).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &ProvisioningRequest{}, &ProvisioningRequestList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
