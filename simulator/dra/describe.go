package dra

import (
	"fmt"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// DescribePodClaims names the pod's claims and the device classes they
// ask for, for messages that say why a pod fits no node: "gpu (from
// ResourceClaimTemplate one-gpu): class gpu.nvidia.com". Claims the
// snapshot does not hold are named from the pod's spec alone.
func (s *Snapshot) DescribePodClaims(pod *apiv1.Pod) string {
	claims, _ := s.PodClaims(pod)
	byName := map[string]*resourceapi.ResourceClaim{}
	for _, c := range claims {
		byName[c.Name] = c
	}
	parts := make([]string, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		ref := &pod.Spec.ResourceClaims[i]
		var b strings.Builder
		b.WriteString(ref.Name)
		switch {
		case ref.ResourceClaimTemplateName != nil:
			fmt.Fprintf(&b, " (from ResourceClaimTemplate %s)", *ref.ResourceClaimTemplateName)
		case ref.ResourceClaimName != nil:
			fmt.Fprintf(&b, " (ResourceClaim %s)", *ref.ResourceClaimName)
		}
		if name, _, err := resourceclaim.Name(pod, ref); err == nil && name != nil {
			if c := byName[*name]; c != nil {
				if classes := requestedClasses(c); len(classes) > 0 {
					b.WriteString(": class " + strings.Join(classes, ", "))
				}
			}
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "; ")
}

// requestedClasses lists the distinct device classes a claim's requests
// name, first-available alternatives included.
func requestedClasses(c *resourceapi.ResourceClaim) []string {
	var out []string
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil {
			out = append(out, r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			out = append(out, sub.DeviceClassName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
