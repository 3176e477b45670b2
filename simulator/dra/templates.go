package dra

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// podClaimNameAnnotation is the annotation the resourceclaim controller
// puts on a claim it made from a template: the pod's claim entry it serves.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// TemplateLookup returns the ResourceClaimTemplate namespace/name.
type TemplateLookup func(namespace, name string) (*resourceapi.ResourceClaimTemplate, error)

// WithTemplateClaims returns pods ready for the simulation: a pod whose
// claim comes from a ResourceClaimTemplate that the resourceclaim
// controller has not instantiated yet gets the claim the controller will
// create (added to the snapshot, owned by the pod) and a copy of the pod
// whose status names it. Other pods are returned as they are. A pod whose
// template cannot be found keeps its missing claim: the plugin then finds
// it unschedulable everywhere, as the scheduler would.
func (s *Snapshot) WithTemplateClaims(pods []*apiv1.Pod, lookup TemplateLookup) []*apiv1.Pod {
	out := pods
	copied := false
	for i, p := range pods {
		np := s.withTemplateClaims(p, lookup)
		if np == p {
			continue
		}
		if !copied {
			out = append([]*apiv1.Pod(nil), pods...)
			copied = true
		}
		out[i] = np
	}
	return out
}

func (s *Snapshot) withTemplateClaims(pod *apiv1.Pod, lookup TemplateLookup) *apiv1.Pod {
	var cp *apiv1.Pod
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		cur := pod
		if cp != nil {
			cur = cp
		}
		if _, _, err := resourceclaim.Name(cur, pc); !errors.Is(err, resourceclaim.ErrClaimNotFound) {
			continue
		}
		if lookup == nil {
			continue
		}
		tmpl, err := lookup(pod.Namespace, *pc.ResourceClaimTemplateName)
		if err != nil || tmpl == nil {
			klog.V(4).InfoS("Claim template of a pending pod not found; its claim is not simulated", "pod", klog.KObj(pod), "template", *pc.ResourceClaimTemplateName, "err", err)
			continue
		}
		claim := s.claimFromTemplate(pod, pc.Name, tmpl)
		s.SetClaim(claim)
		if cp == nil {
			cp = pod.DeepCopy()
		}
		name := claim.Name
		cp.Status.ResourceClaimStatuses = append(cp.Status.ResourceClaimStatuses, apiv1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &name})
	}
	if cp == nil {
		return pod
	}
	return cp
}

// claimFromTemplate builds the claim the resourceclaim controller would
// create for the pod's entry podClaimName: the template's spec, owned by the
// pod. The name is the controller's pattern with a fixed suffix, made
// unique in the snapshot.
func (s *Snapshot) claimFromTemplate(pod *apiv1.Pod, podClaimName string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	base := fmt.Sprintf("%s-%s-sim", pod.Name, podClaimName)
	name := base
	for i := 1; s.Claim(pod.Namespace, name) != nil; i++ {
		name = fmt.Sprintf("%s%d", base, i)
	}
	annotations := maps.Clone(tmpl.Spec.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[podClaimNameAnnotation] = podClaimName
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   pod.Namespace,
			UID:         types.UID(fmt.Sprintf("simulated-%s-%s", pod.UID, podClaimName)),
			Labels:      maps.Clone(tmpl.Spec.Labels),
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}

func ptrTo[T any](v T) *T { return &v }

// SanitizedNodeSlices returns copies of a node's slices for a new simulated
// node nodeName: bound to it, and with slice and pool names made unique by
// suffix, so that its devices are distinct from those of the node they were
// copied from (a device is known by driver, pool and name).
func SanitizedNodeSlices(nodeSlices []*resourceapi.ResourceSlice, nodeName, suffix string) []*resourceapi.ResourceSlice {
	if len(nodeSlices) == 0 {
		return nil
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(nodeSlices))
	for _, sl := range nodeSlices {
		c := sl.DeepCopy()
		c.Name = sl.Name + "-" + suffix
		c.UID = types.UID(c.Name)
		c.ResourceVersion = ""
		c.OwnerReferences = nil
		c.Spec.Pool.Name = sl.Spec.Pool.Name + "-" + suffix
		c.Spec.NodeName = ptrTo(nodeName)
		out = append(out, c)
	}
	return out
}

// Drivers returns the names of the drivers publishing slices, sorted and
// without duplicates.
func Drivers(published []*resourceapi.ResourceSlice) []string {
	seen := map[string]bool{}
	var out []string
	for _, sl := range published {
		if d := sl.Spec.Driver; d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}
