package dra

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// Resources are the resource.k8s.io/v1 resources the autoscaler watches
// to simulate Dynamic Resource Allocation: the devices nodes publish, the
// classes that select them, pods' claims and the templates claims are made
// from.
var Resources = []string{"resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"}

// Served tells whether the cluster serves the DRA API the autoscaler
// reads (resource.k8s.io/v1, GA in Kubernetes 1.34). When it does not, why
// says what is missing: the autoscaler then runs without DRA rather than
// wait forever for informers of an API the server lacks. err is for a
// discovery call that failed for another reason: the answer is then
// unknown, and guessing "no DRA" on a cluster that has it would make every
// claim pod look placeable without its devices.
func Served(d discovery.DiscoveryInterface) (ok bool, why string, err error) {
	gv := resourceapi.SchemeGroupVersion.String()
	list, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("the API server does not serve %s (Kubernetes older than 1.34, or the group disabled with --runtime-config)", gv), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("discovery of %s: %w", gv, err)
	}
	var missing []string
	for _, r := range Resources {
		if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r }) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("the API server serves %s without %v", gv, missing), nil
	}
	return true, "", nil
}
