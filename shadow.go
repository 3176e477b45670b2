package main

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/shadow"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/core/report"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/shadowkube"
)

// Shadow mode (--shadow, docs/shadow-mode.md) is wired at the boundaries
// only: the core decides as always, and these wrappers keep its decisions
// from changing anything. Each returns its argument unchanged without
// --shadow.

// shadowRecorder records shadow mode's metrics: the reporter's, built
// before the core as these wrappers are.
var shadowRecorder shadowkube.Recorder = report.Shadow{}

// shadowProvider wraps the provider so that it sends no write.
func shadowProvider(opts config.AutoscalingOptions, p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
	shadowRecorder.ShadowMode(opts.Shadow)
	if !opts.Shadow {
		return p
	}
	klog.InfoS("Shadow mode: decisions are recorded, not carried out; no cloud provider write is sent, Kubernetes writes to nodes and pods are dry runs",
		"provider", p.Name())
	return shadow.New(p, shadow.Options{Defaults: opts.NodeGroupDefaults, OnWrite: func(w shadow.Write) {
		shadowRecorder.WriteHeld(shadowkube.APICloud, w.Op)
	}})
}

// shadowTransport makes every write of the clients built from cfg a dry
// run (Leases and Events aside): call it on the main client's config only,
// after the events and status clients' configs were copied from it.
func shadowTransport(opts config.AutoscalingOptions, cfg *rest.Config) {
	if !opts.Shadow {
		return
	}
	cfg.Wrap(shadowkube.DryRun(shadowkube.Options{OnWrite: func(op string) {
		shadowRecorder.WriteHeld(shadowkube.APIKubernetes, op)
	}}))
}

// shadowStatus marks the status ConfigMap the client writes.
func shadowStatus(opts config.AutoscalingOptions, kube kubernetes.Interface) kubernetes.Interface {
	if !opts.Shadow {
		return kube
	}
	return shadowkube.MarkStatus(kube, opts.Namespace, opts.StatusConfigMapName)
}

// shadowEvents has the reporter mark every event the recorder records.
func shadowEvents(opts config.AutoscalingOptions, r record.EventRecorder) record.EventRecorder {
	if !opts.Shadow {
		return r
	}
	return report.ShadowEvents(r)
}
