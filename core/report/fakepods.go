package report

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// fakePodEvents is the reporter's recorder: an event on a fake pod never
// names it (the API server has no such pod) but goes to the object it was
// made for, with the pod's name in the message, and is dropped when the
// pod has none.
type fakePodEvents struct{ record.EventRecorder }

// target returns where an event on obj goes and the message prefix, or obj
// itself when it is no fake pod; nil drops the event.
func target(obj runtime.Object) (runtime.Object, string) {
	p, ok := obj.(*apiv1.Pod)
	if !ok || !fakepods.IsFake(p) {
		return obj, ""
	}
	if owner := fakepods.Owner(p); owner != nil {
		return owner, "fake pod " + p.Name + ": "
	}
	return nil, ""
}

func (f fakePodEvents) Event(obj runtime.Object, eventtype, reason, message string) {
	if o, prefix := target(obj); o != nil {
		f.EventRecorder.Event(o, eventtype, reason, prefix+message)
	}
}

func (f fakePodEvents) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if o, prefix := target(obj); o != nil {
		f.EventRecorder.Event(o, eventtype, reason, prefix+fmt.Sprintf(messageFmt, args...))
	}
}

func (f fakePodEvents) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if o, prefix := target(obj); o != nil {
		f.EventRecorder.AnnotatedEventf(o, annotations, eventtype, reason, "%s", prefix+fmt.Sprintf(messageFmt, args...))
	}
}
