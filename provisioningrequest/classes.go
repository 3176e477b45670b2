// Package provisioningrequest serves ProvisioningRequests
// (autoscaling.x-k8s.io/v1) of the classes check-capacity and
// best-effort-atomic-scale-up, as upstream cluster-autoscaler 1.36 does:
// it turns a request's pod sets into pods the simulation places, answers
// with conditions on the request, and books the room of a Provisioned
// request (fake pods placed before pending ones in every later iteration)
// until its consumers run or the booking expires.
package provisioningrequest

import (
	"strings"

	"k8s.io/klog/v2"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
)

// ProcessorInstanceParameter is the request parameter naming the
// autoscaler instance that serves a check-capacity request
// (--check-capacity-processor-instance).
const ProcessorInstanceParameter = "processorInstance"

// Supported says whether this autoscaler serves pr's class, given its
// --check-capacity-processor-instance: best-effort-atomic only without an
// instance name; check-capacity when the instance names match (or, as
// upstream still accepts with a warning, the class is the instance name
// followed by the check-capacity class).
func Supported(pr *v1.ProvisioningRequest, instance string) bool {
	if pr.Spec.ProvisioningClassName == v1.ProvisioningClassBestEffortAtomicScaleUp {
		return instance == ""
	}
	return SupportedCheckCapacity(pr, instance)
}

// SupportedCheckCapacity is Supported for the check-capacity class alone.
func SupportedCheckCapacity(pr *v1.ProvisioningRequest, instance string) bool {
	class := pr.Spec.ProvisioningClassName
	requested := string(pr.Spec.Parameters[ProcessorInstanceParameter])
	switch {
	case instance == "":
		return requested == "" && class == v1.ProvisioningClassCheckCapacity
	case requested != "":
		return requested == instance && class == v1.ProvisioningClassCheckCapacity
	case strings.HasPrefix(class, instance) && class[len(instance):] == v1.ProvisioningClassCheckCapacity:
		klog.InfoS("ProvisioningRequest names its processor instance as a prefix of its class; use the parameter instead",
			"provisioningRequest", klog.KObj(pr), "class", class, "parameter", ProcessorInstanceParameter)
		return true
	}
	return false
}
