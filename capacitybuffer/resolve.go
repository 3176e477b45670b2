package capacitybuffer

import (
	"errors"
	"fmt"
	"math"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/fakepods"
)

// Sources are the caches buffers are resolved from.
type Sources struct {
	PodTemplates           corelisters.PodTemplateLister
	Deployments            appslisters.DeploymentLister
	ReplicaSets            appslisters.ReplicaSetLister
	StatefulSets           appslisters.StatefulSetLister
	Jobs                   batchlisters.JobLister
	ReplicationControllers corelisters.ReplicationControllerLister
}

// Resolved is a buffer's pod shape and size.
type Resolved struct {
	// Template of the buffer's pods, with requests defaulted from limits.
	// It comes from the autoscaler's caches, which trim pod templates
	// (internal/informercache): it shapes fake pods in the simulation only and
	// is never sent to the API server (the dry run reads the live object,
	// live.go).
	Template *apiv1.PodTemplateSpec
	// SourceGeneration is the generation of the PodTemplate or workload the
	// template came from: it changes with any change of the template, also
	// of fields the cache trims (a security context).
	SourceGeneration int64
	// TemplateRef and TemplateGeneration name the PodTemplate it came from
	// (podTemplateRef buffers only).
	TemplateRef        *v1beta1.LocalObjectRef
	TemplateGeneration *int64
	Replicas           int32
}

// Resolve finds the buffer's pod template and number of replicas. The
// error names the spec field at fault.
func (s Sources) Resolve(b *v1beta1.CapacityBuffer) (*Resolved, error) {
	spec := b.Spec
	var (
		r        = &Resolved{}
		scalable *int32
		err      error
	)
	switch {
	case spec.PodTemplateRef != nil && spec.ScalableRef != nil:
		return nil, errors.New("spec: podTemplateRef and scalableRef are both set; set one")
	case spec.PodTemplateRef != nil:
		pt, err := s.PodTemplates.PodTemplates(b.Namespace).Get(spec.PodTemplateRef.Name)
		if err != nil {
			return nil, fmt.Errorf("spec.podTemplateRef: PodTemplate %s/%s: %w", b.Namespace, spec.PodTemplateRef.Name, err)
		}
		r.Template = pt.Template.DeepCopy()
		r.TemplateRef = &v1beta1.LocalObjectRef{Name: pt.Name}
		gen := pt.Generation
		r.TemplateGeneration = &gen
		r.SourceGeneration = gen
	case spec.ScalableRef != nil:
		if r.Template, scalable, r.SourceGeneration, err = s.scalable(b.Namespace, *spec.ScalableRef); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("spec: neither podTemplateRef nor scalableRef is set")
	}
	fakepods.RequestsFromLimits(&r.Template.Spec)
	if r.Replicas, err = replicas(spec, r.Template, scalable); err != nil {
		return nil, err
	}
	return r, nil
}

// scalableKinds are the kinds a scalableRef may name, by API group and kind
// (upstream's list; "core" is upstream's spelling of the core group).
var scalableKinds = []string{"apps/Deployment", "apps/ReplicaSet", "apps/StatefulSet", "batch/Job", "ReplicationController"}

// scalable returns the template, desired replicas (a Job's parallelism)
// and generation of the object ref names.
func (s Sources) scalable(ns string, ref v1beta1.ScalableRef) (*apiv1.PodTemplateSpec, *int32, int64, error) {
	group := ref.APIGroup
	if group == "core" {
		group = ""
	}
	key := ref.Kind
	if group != "" {
		key = group + "/" + ref.Kind
	}
	var (
		tmpl     *apiv1.PodTemplateSpec
		replicas *int32
		gen      int64
		err      error
	)
	switch key {
	case "apps/Deployment":
		if o, e := s.Deployments.Deployments(ns).Get(ref.Name); e == nil {
			tmpl, replicas, gen = &o.Spec.Template, o.Spec.Replicas, o.Generation
		} else {
			err = e
		}
	case "apps/ReplicaSet":
		if o, e := s.ReplicaSets.ReplicaSets(ns).Get(ref.Name); e == nil {
			tmpl, replicas, gen = &o.Spec.Template, o.Spec.Replicas, o.Generation
		} else {
			err = e
		}
	case "apps/StatefulSet":
		if o, e := s.StatefulSets.StatefulSets(ns).Get(ref.Name); e == nil {
			tmpl, replicas, gen = &o.Spec.Template, o.Spec.Replicas, o.Generation
		} else {
			err = e
		}
	case "batch/Job":
		if o, e := s.Jobs.Jobs(ns).Get(ref.Name); e == nil {
			tmpl, replicas, gen = &o.Spec.Template, o.Spec.Parallelism, o.Generation
		} else {
			err = e
		}
	case "ReplicationController":
		if o, e := s.ReplicationControllers.ReplicationControllers(ns).Get(ref.Name); e == nil {
			tmpl, replicas, gen = o.Spec.Template, o.Spec.Replicas, o.Generation
		} else {
			err = e
		}
	default:
		return nil, nil, 0, fmt.Errorf("spec.scalableRef: %q is not a supported kind (one of %s)", key, strings.Join(scalableKinds, ", "))
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("spec.scalableRef: %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	if tmpl == nil {
		return nil, nil, 0, fmt.Errorf("spec.scalableRef: %s %s/%s has no pod template", ref.Kind, ns, ref.Name)
	}
	if replicas == nil {
		one := int32(1) // the API's default
		replicas = &one
	}
	return tmpl.DeepCopy(), replicas, gen, nil
}

// replicas is the buffer's size, as upstream computes it: the smallest of
// spec.replicas, spec.percentage of the scalable object's replicas (rounded
// down) and as many pods as fit spec.limits; at least one of them must
// apply.
func replicas(spec v1beta1.CapacityBufferSpec, tmpl *apiv1.PodTemplateSpec, scalable *int32) (int32, error) {
	n, set := int32(math.MaxInt32), false
	if spec.Replicas != nil {
		n, set = min(n, max(0, *spec.Replicas)), true
	}
	if spec.Percentage != nil && scalable != nil {
		n, set = min(n, int32(max(0, int64(*spec.Percentage)*int64(*scalable)/100))), true
	}
	if spec.Limits != nil {
		fit, err := fitLimits(tmpl, *spec.Limits)
		if err != nil {
			return 0, err
		}
		n, set = min(n, fit), true
	}
	if !set {
		if spec.Percentage != nil {
			return 0, errors.New("spec.percentage: applies to a scalableRef only, and neither replicas nor limits is set")
		}
		return 0, errors.New("spec: none of replicas, percentage and limits is set")
	}
	return n, nil
}

// fitLimits returns how many pods of tmpl fit within limits, by every
// resource the pods request and the limits name.
func fitLimits(tmpl *apiv1.PodTemplateSpec, limits v1beta1.ResourceList) (int32, error) {
	reqs := resourcehelper.PodRequests(&apiv1.Pod{Spec: tmpl.Spec}, resourcehelper.PodResourcesOptions{})
	n, found := int64(math.MaxInt32), false
	for name, q := range reqs {
		per := q.MilliValue()
		limit, ok := limits[v1beta1.ResourceName(name)]
		if per <= 0 || !ok {
			continue
		}
		found = true
		n = min(n, max(0, limit.MilliValue()/per))
	}
	if !found {
		return 0, errors.New("spec.limits: names no resource the pod template requests")
	}
	return int32(n), nil
}
