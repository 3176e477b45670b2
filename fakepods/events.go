package fakepods

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// FakePodEvents wraps a recorder so that events about fake pods never name
// them (the API server has no such pod): an event on a fake pod goes to the
// object that owns it (its controller owner reference: the CapacityBuffer
// or ProvisioningRequest the processor made it for), with the pod's name in
// the message, and is dropped when the pod has no owner.
func FakePodEvents(r record.EventRecorder) record.EventRecorder {
	return fakePodEvents{r}
}

type fakePodEvents struct{ record.EventRecorder }

// owner returns where an event on obj goes and the message prefix, or obj
// itself when it is no fake pod; nil drops the event.
func owner(obj runtime.Object) (runtime.Object, string) {
	p, ok := obj.(*apiv1.Pod)
	if !ok || !IsFake(p) {
		return obj, ""
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, ""
	}
	return &apiv1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, Namespace: p.Namespace, UID: ref.UID},
		"fake pod " + p.Name + ": "
}

func (f fakePodEvents) Event(obj runtime.Object, eventtype, reason, message string) {
	if o, prefix := owner(obj); o != nil {
		f.EventRecorder.Event(o, eventtype, reason, prefix+message)
	}
}

func (f fakePodEvents) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if o, prefix := owner(obj); o != nil {
		f.EventRecorder.Event(o, eventtype, reason, prefix+fmt.Sprintf(messageFmt, args...))
	}
}

func (f fakePodEvents) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if o, prefix := owner(obj); o != nil {
		f.EventRecorder.AnnotatedEventf(o, annotations, eventtype, reason, "%s", prefix+fmt.Sprintf(messageFmt, args...))
	}
}
