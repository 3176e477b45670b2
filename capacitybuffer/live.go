package capacitybuffer

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// liveTemplate is a pod template read from the API server itself, never
// from the autoscaler's caches: those drop from every cached pod template
// what the simulation does not read (security contexts, env, command,
// probes; internal/informercache), and a pod made from such a template would be
// judged by admission for fields its owner never removed (a namespace
// enforcing the restricted Pod Security Standard refuses a pod without its
// securityContext). The dry run takes this type only, and only readLive
// makes one: a cached template cannot reach the API server by mistake.
type liveTemplate struct {
	spec *apiv1.PodTemplateSpec
}

// readLive reads the template of the object b's spec names from the API
// server. It lists by name (a field selector) rather than getting, so that
// the list permission the caches need already is the only one it needs.
func readLive(ctx context.Context, kube kubernetes.Interface, b *v1beta1.CapacityBuffer) (liveTemplate, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	ns := b.Namespace
	var name, what string
	switch {
	case b.Spec.PodTemplateRef != nil:
		name, what = b.Spec.PodTemplateRef.Name, "PodTemplate"
	case b.Spec.ScalableRef != nil:
		name, what = b.Spec.ScalableRef.Name, b.Spec.ScalableRef.Kind
	default:
		return liveTemplate{}, fmt.Errorf("spec: neither podTemplateRef nor scalableRef is set")
	}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	var tmpl *apiv1.PodTemplateSpec
	var err error
	switch {
	case b.Spec.PodTemplateRef != nil:
		var l *apiv1.PodTemplateList
		if l, err = kube.CoreV1().PodTemplates(ns).List(ctx, opts); err == nil {
			for i := range l.Items {
				if l.Items[i].Name == name {
					tmpl = &l.Items[i].Template
				}
			}
		}
	default:
		tmpl, err = liveWorkloadTemplate(ctx, kube, ns, name, *b.Spec.ScalableRef, opts)
	}
	if err != nil {
		return liveTemplate{}, fmt.Errorf("reading %s %s/%s: %w", what, ns, name, err)
	}
	if tmpl == nil {
		return liveTemplate{}, fmt.Errorf("%s %s/%s not found", what, ns, name)
	}
	return liveTemplate{spec: tmpl}, nil
}

// liveWorkloadTemplate is readLive for a scalableRef (the kinds Resolve
// accepts; it ran first).
func liveWorkloadTemplate(ctx context.Context, kube kubernetes.Interface, ns, name string, ref v1beta1.ScalableRef, opts metav1.ListOptions) (*apiv1.PodTemplateSpec, error) {
	switch ref.Kind {
	case "Deployment":
		l, err := kube.AppsV1().Deployments(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if l.Items[i].Name == name {
				return &l.Items[i].Spec.Template, nil
			}
		}
	case "ReplicaSet":
		l, err := kube.AppsV1().ReplicaSets(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if l.Items[i].Name == name {
				return &l.Items[i].Spec.Template, nil
			}
		}
	case "StatefulSet":
		l, err := kube.AppsV1().StatefulSets(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if l.Items[i].Name == name {
				return &l.Items[i].Spec.Template, nil
			}
		}
	case "Job":
		l, err := kube.BatchV1().Jobs(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if l.Items[i].Name == name {
				return &l.Items[i].Spec.Template, nil
			}
		}
	case "ReplicationController":
		l, err := kube.CoreV1().ReplicationControllers(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			if l.Items[i].Name == name {
				return l.Items[i].Spec.Template, nil
			}
		}
	default:
		return nil, fmt.Errorf("%q is not a supported kind", ref.Kind)
	}
	return nil, nil
}
