package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Deep copies, written by hand (the project has no code generator): every
// pointer, map and slice is copied.

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies b into out.
func (b *CapacityBuffer) DeepCopyInto(out *CapacityBuffer) {
	*out = *b
	out.TypeMeta = b.TypeMeta
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Spec.DeepCopyInto(&out.Spec)
	b.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of b.
func (b *CapacityBuffer) DeepCopy() *CapacityBuffer {
	if b == nil {
		return nil
	}
	out := new(CapacityBuffer)
	b.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (b *CapacityBuffer) DeepCopyObject() runtime.Object { return b.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *CapacityBufferSpec) DeepCopyInto(out *CapacityBufferSpec) {
	*out = *s
	out.ProvisioningStrategy = copyPtr(s.ProvisioningStrategy)
	out.PodTemplateRef = copyPtr(s.PodTemplateRef)
	out.ScalableRef = copyPtr(s.ScalableRef)
	out.Replicas = copyPtr(s.Replicas)
	out.Percentage = copyPtr(s.Percentage)
	if s.Limits != nil {
		l := make(ResourceList, len(*s.Limits))
		for k, v := range *s.Limits {
			l[k] = v.DeepCopy()
		}
		out.Limits = &l
	}
}

// DeepCopyInto copies s into out.
func (s *CapacityBufferStatus) DeepCopyInto(out *CapacityBufferStatus) {
	*out = *s
	out.PodTemplateRef = copyPtr(s.PodTemplateRef)
	out.Replicas = copyPtr(s.Replicas)
	out.PodTemplateGeneration = copyPtr(s.PodTemplateGeneration)
	out.ProvisioningStrategy = copyPtr(s.ProvisioningStrategy)
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *CapacityBufferList) DeepCopy() *CapacityBufferList {
	if l == nil {
		return nil
	}
	out := &CapacityBufferList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]CapacityBuffer, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *CapacityBufferList) DeepCopyObject() runtime.Object { return l.DeepCopy() }
