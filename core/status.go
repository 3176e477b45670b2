package core

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/statuscm"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// statusWriter writes the status ConfigMap (--write-status-configmap) with
// a client of its own (see NewAutoscaler), keeping the object the last
// write returned so the next one updates it without reading it first.
type statusWriter struct {
	kube            kubernetes.Interface
	namespace, name string
	// recorder records a failed write (the reporter, set with it).
	recorder statuscm.Recorder
	// last is the ConfigMap as the last write returned it (nil after a
	// failed write: the next one reads it again); written: one write
	// succeeded, so the ConfigMap is this process's to delete at exit.
	last    *apiv1.ConfigMap
	written bool
}

// write writes st, bounded by apiTimeout.
func (w *statusWriter) write(ctx context.Context, st *api.ClusterAutoscalerStatus) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cm, err := statuscm.WriteStatusConfigMap(ctx, w.kube, w.namespace, w.name, w.last, st, w.recorder, time.Now())
	w.last = cm
	if err == nil {
		w.written = true
	}
	return err
}

// remove deletes the ConfigMap at exit, if this process wrote it.
func (w *statusWriter) remove() error {
	if !w.written {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitAPITimeout)
	defer cancel()
	return statuscm.DeleteStatusConfigMap(ctx, w.kube, w.namespace, w.name)
}

// statusConfigMapRef is the object the autoscaler's own events are
// recorded against: the status ConfigMap.
func statusConfigMapRef(opts config.AutoscalingOptions) *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
}
