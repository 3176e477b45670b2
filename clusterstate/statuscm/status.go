// Package statuscm writes the autoscaler's status ConfigMap.
package statuscm

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
)

const (
	// StatusDataKey is the ConfigMap data key holding the status YAML.
	StatusDataKey = "status"
	// LastUpdatedAnnotation holds the time of the last write (api.StatusTimeLayout).
	LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"
)

// Recorder records a write of the status ConfigMap that failed. The
// reporter (core/report) implements it: it alone writes events.
type Recorder interface {
	// StatusWriteFailed: the last update of cm failed with err.
	StatusWriteFailed(cm *apiv1.ConfigMap, err error)
}

// StatusYAML renders status as the ConfigMap holds it: the bytes
// sigs.k8s.io/yaml writes (upstream's rendering: keys sorted, block style),
// written directly (render). Every status renders.
func StatusYAML(status *api.ClusterAutoscalerStatus) string {
	return render(status)
}

// WriteStatusConfigMap creates or updates the status ConfigMap namespace/name
// with status as YAML under data key "status" and the last-updated annotation.
// now is the write time, for the annotation and, when status.Time is empty,
// for status.Time (set on a copy; the caller's
// value is not changed). An update that fails (typically a conflict with another
// writer) is retried once after a fresh get. last, when not nil, is the
// ConfigMap as the previous write returned it: it is updated without reading
// it first (a stale one fails with a conflict and takes the retry), which
// saves the autoscaler's client one call per loop. recorder may be nil; when set, a
// failed update of a ConfigMap that exists is recorded through it.
// Errors name the ConfigMap and are returned, not logged: the caller logs them.
func WriteStatusConfigMap(ctx context.Context, kube kubernetes.Interface, namespace, name string, last *apiv1.ConfigMap,
	status *api.ClusterAutoscalerStatus, recorder Recorder, now time.Time) (*apiv1.ConfigMap, error) {
	if status == nil {
		return nil, fmt.Errorf("writing status ConfigMap %s/%s: nil status", namespace, name)
	}
	stamp := api.FormatTime(now)
	toWrite := *status
	if toWrite.Time == "" {
		toWrite.Time = stamp
	}
	body := StatusYAML(&toWrite)

	cms := kube.CoreV1().ConfigMaps(namespace)
	existing := last
	var err error
	if existing == nil || existing.Namespace != namespace || existing.Name != name {
		existing, err = cms.Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		cm := &apiv1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   namespace,
				Name:        name,
				Annotations: map[string]string{LastUpdatedAnnotation: stamp},
			},
			Data: map[string]string{StatusDataKey: body},
		}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			klog.V(4).InfoS("Created the status ConfigMap", "configMap", klog.KRef(namespace, name), "autoscalerStatus", toWrite.AutoscalerStatus)
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating status ConfigMap %s/%s: %w", namespace, name, err)
		}
		// Someone else created it between our get and create: update theirs.
		klog.V(4).InfoS("Status ConfigMap appeared while creating it; updating instead", "configMap", klog.KRef(namespace, name))
		existing, err = cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting status ConfigMap %s/%s: %w", namespace, name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("getting status ConfigMap %s/%s: %w", namespace, name, err)
	}

	updated, err := cms.Update(ctx, withStatus(existing, body, stamp), metav1.UpdateOptions{})
	if err == nil {
		klog.V(4).InfoS("Updated the status ConfigMap", "configMap", klog.KRef(namespace, name), "autoscalerStatus", toWrite.AutoscalerStatus)
		return updated, nil
	}
	klog.V(2).InfoS("Updating the status ConfigMap failed; retrying once with a fresh copy", "configMap", klog.KRef(namespace, name), "err", err)
	fresh, getErr := cms.Get(ctx, name, metav1.GetOptions{})
	if getErr != nil {
		reportFailure(recorder, existing, err)
		return nil, fmt.Errorf("updating status ConfigMap %s/%s: %w (get for retry: %v)", namespace, name, err, getErr)
	}
	updated, err = cms.Update(ctx, withStatus(fresh, body, stamp), metav1.UpdateOptions{})
	if err != nil {
		reportFailure(recorder, fresh, err)
		return nil, fmt.Errorf("updating status ConfigMap %s/%s after retry: %w", namespace, name, err)
	}
	klog.V(4).InfoS("Updated the status ConfigMap on retry", "configMap", klog.KRef(namespace, name), "autoscalerStatus", toWrite.AutoscalerStatus)
	return updated, nil
}

// withStatus returns a copy of cm carrying body and stamp; other data keys and
// annotations (e.g. added by a user or a tool) are kept.
func withStatus(cm *apiv1.ConfigMap, body, stamp string) *apiv1.ConfigMap {
	out := cm.DeepCopy()
	if out.Data == nil {
		out.Data = map[string]string{}
	}
	out.Data[StatusDataKey] = body
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[LastUpdatedAnnotation] = stamp
	return out
}

func reportFailure(recorder Recorder, cm *apiv1.ConfigMap, err error) {
	if recorder == nil || cm == nil {
		return
	}
	recorder.StatusWriteFailed(cm, err)
}

// DeleteStatusConfigMap deletes the status ConfigMap; one that is already gone
// is not an error. An error is returned, not logged: the caller logs it.
func DeleteStatusConfigMap(ctx context.Context, kube kubernetes.Interface, namespace, name string) error {
	err := kube.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		klog.InfoS("Deleted the status ConfigMap", "configMap", klog.KRef(namespace, name))
		return nil
	case apierrors.IsNotFound(err):
		klog.V(2).InfoS("Status ConfigMap already gone", "configMap", klog.KRef(namespace, name))
		return nil
	default:
		return fmt.Errorf("deleting status ConfigMap %s/%s: %w", namespace, name, err)
	}
}
