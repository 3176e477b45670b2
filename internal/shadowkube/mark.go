package shadowkube

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/statuscm"
)

// Recorder records shadow mode and the writes it held back. The reporter
// (core/report.Shadow) implements it: it alone writes metrics.
type Recorder interface {
	// ShadowMode records whether shadow mode is on.
	ShadowMode(on bool)
	// WriteHeld records a write not carried out: api is APICloud or
	// APIKubernetes.
	WriteHeld(api, operation string)
}

// What a held-back write was for, WriteHeld's api.
const (
	// APICloud: the provider's write, not sent.
	APICloud = "cloud"
	// APIKubernetes: the main client's write, sent with dryRun=All.
	APIKubernetes = "kubernetes"
)

// Annotation marks the events and the status ConfigMap of an autoscaler in
// shadow mode (value "true").
const Annotation = "cluster-autoscaler.kubernetes.io/shadow-mode"

// MessagePrefix starts the message of every event recorded in shadow mode
// (the reporter marks them, core/report.ShadowEvents); reasons stay as
// they are, so tools matching them still do.
const MessagePrefix = "[shadow] "

// StatusNote starts the status ConfigMap's message in shadow mode.
const StatusNote = "Shadow mode (--shadow): decisions are recorded, not carried out"

// MarkStatus returns a client whose creates and updates of the ConfigMap
// namespace/name (the status ConfigMap) carry Annotation and StatusNote at
// the start of the status' message. Everything else is kube's.
func MarkStatus(kube kubernetes.Interface, namespace, name string) kubernetes.Interface {
	return statusClient{Interface: kube, namespace: namespace, name: name}
}

type statusClient struct {
	kubernetes.Interface
	namespace, name string
}

func (c statusClient) CoreV1() typedcorev1.CoreV1Interface {
	return statusCore{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

type statusCore struct {
	typedcorev1.CoreV1Interface
	c statusClient
}

func (s statusCore) ConfigMaps(namespace string) typedcorev1.ConfigMapInterface {
	cms := s.CoreV1Interface.ConfigMaps(namespace)
	if namespace != s.c.namespace {
		return cms
	}
	return statusConfigMaps{ConfigMapInterface: cms, name: s.c.name}
}

type statusConfigMaps struct {
	typedcorev1.ConfigMapInterface
	name string
}

func (s statusConfigMaps) Create(ctx context.Context, cm *apiv1.ConfigMap, opts metav1.CreateOptions) (*apiv1.ConfigMap, error) {
	return s.ConfigMapInterface.Create(ctx, s.mark(cm), opts)
}

func (s statusConfigMaps) Update(ctx context.Context, cm *apiv1.ConfigMap, opts metav1.UpdateOptions) (*apiv1.ConfigMap, error) {
	return s.ConfigMapInterface.Update(ctx, s.mark(cm), opts)
}

// mark returns a marked copy of the status ConfigMap (others unchanged).
func (s statusConfigMaps) mark(cm *apiv1.ConfigMap) *apiv1.ConfigMap {
	if cm == nil || cm.Name != s.name {
		return cm
	}
	out := cm.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[Annotation] = "true"
	if body, ok := out.Data[statuscm.StatusDataKey]; ok {
		out.Data[statuscm.StatusDataKey] = MarkStatusBody(body)
	}
	return out
}

// MarkStatusBody puts StatusNote at the start of a status' message; a body
// that does not parse is left as it is.
func MarkStatusBody(body string) string {
	var st api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(body), &st); err != nil {
		return body
	}
	if st.Message == "" {
		st.Message = StatusNote
	} else {
		st.Message = StatusNote + "; " + st.Message
	}
	return statuscm.StatusYAML(&st)
}
