package provisioningrequest

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// templateGetter returns a PodTemplate by namespace and name.
type templateGetter func(namespace, name string) (*apiv1.PodTemplate, error)

// podsFor builds the fake pods a request asks room for: Count pods per pod
// set, from its PodTemplate, owned by the request (events about them go to
// it), named <request>-<set>-<index> as upstream names them (whatever the
// template's generateName: the names, and the UIDs made from them, must
// be unique across requests). An error names the pod set that is invalid.
func podsFor(pr *v1.ProvisioningRequest, get templateGetter) ([]*apiv1.Pod, error) {
	if len(pr.Spec.PodSets) == 0 {
		return nil, fmt.Errorf("spec.podSets is empty")
	}
	owner := metav1.OwnerReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}
	var out []*apiv1.Pod
	for i, ps := range pr.Spec.PodSets {
		if ps.Count < 1 {
			return nil, fmt.Errorf("spec.podSets[%d].count: %d, must be at least 1", i, ps.Count)
		}
		if ps.PodTemplateRef.Name == "" {
			return nil, fmt.Errorf("spec.podSets[%d].podTemplateRef.name is empty", i)
		}
		tmpl, err := get(pr.Namespace, ps.PodTemplateRef.Name)
		if err != nil {
			return nil, fmt.Errorf("spec.podSets[%d].podTemplateRef: PodTemplate %s/%s: %w", i, pr.Namespace, ps.PodTemplateRef.Name, err)
		}
		if len(tmpl.Template.Spec.Containers) == 0 {
			return nil, fmt.Errorf("spec.podSets[%d].podTemplateRef: PodTemplate %s/%s has no containers", i, pr.Namespace, ps.PodTemplateRef.Name)
		}
		for j := 0; j < int(ps.Count); j++ {
			p := &apiv1.Pod{
				ObjectMeta: *tmpl.Template.ObjectMeta.DeepCopy(),
				Spec:       *tmpl.Template.Spec.DeepCopy(),
			}
			fakepods.RequestsFromLimits(&p.Spec)
			p.GenerateName = pr.Name + "-"
			p.Name = fmt.Sprintf("%s%d-%d", p.GenerateName, i, j)
			p.Namespace = pr.Namespace
			p.UID = types.UID(p.Namespace + "/" + p.Name)
			p.CreationTimestamp = pr.CreationTimestamp
			p.OwnerReferences = []metav1.OwnerReference{owner}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[v1.ProvisioningRequestPodAnnotationKey] = pr.Name
			p.Annotations[v1.ProvisioningClassPodAnnotationKey] = pr.Spec.ProvisioningClassName
			if p.Spec.SchedulerName == "" {
				p.Spec.SchedulerName = apiv1.DefaultSchedulerName
			}
			fakepods.MarkFake(p)
			out = append(out, p)
		}
	}
	return out, nil
}

// ConsumedRequest returns the name of the request a pod consumes (Kueue's
// annotation or upstream's older spelling) and whether it consumes one.
func ConsumedRequest(p *apiv1.Pod) (string, bool) {
	if name, ok := p.Annotations[v1.ProvisioningRequestPodAnnotationKey]; ok {
		return name, true
	}
	name, ok := p.Annotations[v1.DeprecatedProvisioningRequestPodAnnotationKey]
	return name, ok
}
