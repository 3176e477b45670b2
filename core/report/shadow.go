package report

import (
	"maps"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/doks-autoscaler/cluster-autoscaler/internal/shadowkube"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

var _ shadowkube.Recorder = Shadow{}

// Shadow mode's case (--shadow, docs/shadow-mode.md): its events are
// marked and the writes it held back counted. main wires both at the
// boundaries, where shadow mode is, before the core and its Reporter
// exist; the leader election's events are marked too.

// ShadowEvents returns a recorder that starts every message with
// shadowkube.MessagePrefix and annotates every event with
// shadowkube.Annotation.
func ShadowEvents(r record.EventRecorder) record.EventRecorder { return shadowEvents{r} }

type shadowEvents struct{ r record.EventRecorder }

func shadowAnnotations(extra map[string]string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, extra)
	out[shadowkube.Annotation] = "true"
	return out
}

func (m shadowEvents) Event(obj runtime.Object, eventtype, reason, message string) {
	m.r.AnnotatedEventf(obj, shadowAnnotations(nil), eventtype, reason, "%s", shadowkube.MessagePrefix+message)
}

func (m shadowEvents) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	m.r.AnnotatedEventf(obj, shadowAnnotations(nil), eventtype, reason, shadowkube.MessagePrefix+messageFmt, args...)
}

func (m shadowEvents) AnnotatedEventf(obj runtime.Object, ann map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	m.r.AnnotatedEventf(obj, shadowAnnotations(ann), eventtype, reason, shadowkube.MessagePrefix+messageFmt, args...)
}

// Shadow records shadow mode's metrics (shadowkube.Recorder):
// cluster_autoscaler_shadow_mode and shadow_writes_total. It holds
// nothing, so main can build it before the core.
type Shadow struct{}

// ShadowMode sets cluster_autoscaler_shadow_mode.
func (Shadow) ShadowMode(on bool) { metrics.SetShadowMode(on) }

// WriteHeld counts a write shadow mode did not carry out.
func (Shadow) WriteHeld(api, operation string) { metrics.RegisterShadowWrite(api, operation) }
