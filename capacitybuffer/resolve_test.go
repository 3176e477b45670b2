package capacitybuffer

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// podSpec returns a template of one container requesting cpu (limits only when limitOnly, as
// the API server defaults requests from them).
func podSpec(cpu string, limitOnly bool) apiv1.PodTemplateSpec {
	q := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}
	c := apiv1.Container{Name: "app", Image: "app"}
	if limitOnly {
		c.Resources.Limits = q
	} else {
		c.Resources.Requests = q
	}
	return apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: apiv1.PodSpec{Containers: []apiv1.Container{c}}}
}

// testSources holds objects in namespace "apps": PodTemplate "shape" (1
// cpu, generation 3), Deployment "web" (10 replicas, 500m), Deployment
// "nil-replicas", StatefulSet "db" (4), Job "batch" (parallelism 6),
// ReplicaSet "rs" (2).
func testSources(t *testing.T, extra ...runtime.Object) Sources {
	idx := func(objs ...runtime.Object) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return i
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 3}
	}
	return Sources{
		PodTemplates: corelisters.NewPodTemplateLister(idx(&apiv1.PodTemplate{ObjectMeta: meta("shape"), Template: podSpec("1", true)})),
		Deployments: appslisters.NewDeploymentLister(idx(
			&appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10), Template: podSpec("500m", false)}},
			&appsv1.Deployment{ObjectMeta: meta("nil-replicas"), Spec: appsv1.DeploymentSpec{Template: podSpec("500m", false)}})),
		ReplicaSets:            appslisters.NewReplicaSetLister(idx(&appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: podSpec("1", false)}})),
		StatefulSets:           appslisters.NewStatefulSetLister(idx(&appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](4), Template: podSpec("2", false)}})),
		Jobs:                   batchlisters.NewJobLister(idx(&batchv1.Job{ObjectMeta: meta("batch"), Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](6), Template: podSpec("1", false)}})),
		ReplicationControllers: corelisters.NewReplicationControllerLister(idx()),
	}
}

func TestResolve(t *testing.T) {
	cpu := func(s string) *v1beta1.ResourceList {
		return &v1beta1.ResourceList{"cpu": resource.MustParse(s)}
	}
	tmpl := &v1beta1.LocalObjectRef{Name: "shape"}
	deploy := &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}
	cases := []struct {
		name     string
		spec     v1beta1.CapacityBufferSpec
		replicas int32
		cpu      string // the resolved template's cpu request
		err      string // a substring of the error (naming the field)
	}{
		{name: "pod template and replicas", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2)}, replicas: 2, cpu: "1"},
		{name: "pod template sized by limits", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Limits: cpu("3500m")}, replicas: 3, cpu: "1"},
		{name: "replicas bounded by limits", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](5), Limits: cpu("2")}, replicas: 2, cpu: "1"},
		{name: "negative replicas count as zero", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](-1)}, replicas: 0, cpu: "1"},
		{name: "percentage of a deployment, rounded down", spec: v1beta1.CapacityBufferSpec{ScalableRef: deploy, Percentage: ptr.To[int32](25)}, replicas: 2, cpu: "500m"},
		{name: "percentage and replicas: the smaller", spec: v1beta1.CapacityBufferSpec{ScalableRef: deploy, Percentage: ptr.To[int32](50), Replicas: ptr.To[int32](3)}, replicas: 3, cpu: "500m"},
		{name: "percentage of a deployment without replicas (1)", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "nil-replicas"}, Percentage: ptr.To[int32](100)}, replicas: 1, cpu: "500m"},
		{name: "statefulset", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "db"}, Percentage: ptr.To[int32](50)}, replicas: 2, cpu: "2"},
		{name: "replicaset", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "ReplicaSet", Name: "rs"}, Replicas: ptr.To[int32](1)}, replicas: 1, cpu: "1"},
		{name: "job by parallelism", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "batch", Kind: "Job", Name: "batch"}, Percentage: ptr.To[int32](50)}, replicas: 3, cpu: "1"},

		{name: "missing pod template", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "gone"}, Replicas: ptr.To[int32](1)}, err: `spec.podTemplateRef: PodTemplate apps/gone: podtemplate "gone" not found`},
		{name: "missing deployment", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "gone"}, Replicas: ptr.To[int32](1)}, err: "spec.scalableRef: Deployment apps/gone"},
		{name: "unsupported kind", spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "DaemonSet", Name: "x"}, Replicas: ptr.To[int32](1)}, err: `spec.scalableRef: "apps/DaemonSet" is not a supported kind`},
		{name: "percentage without a scalable object", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Percentage: ptr.To[int32](10)}, err: "spec.percentage: applies to a scalableRef only"},
		{name: "no size", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl}, err: "spec: none of replicas, percentage and limits is set"},
		{name: "limits on a resource not requested", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Limits: &v1beta1.ResourceList{"memory": resource.MustParse("1Gi")}}, err: "spec.limits: names no resource the pod template requests"},
		{name: "both refs", spec: v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, ScalableRef: deploy, Replicas: ptr.To[int32](1)}, err: "spec: podTemplateRef and scalableRef are both set"},
		{name: "no ref", spec: v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](1)}, err: "spec: neither podTemplateRef nor scalableRef is set"},
	}
	src := testSources(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "b"}, Spec: tc.spec}
			r, err := src.Resolve(b)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Replicas != tc.replicas {
				t.Errorf("replicas %d, want %d", r.Replicas, tc.replicas)
			}
			got := r.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU]
			if got.Cmp(resource.MustParse(tc.cpu)) != 0 {
				t.Errorf("cpu request %s, want %s", got.String(), tc.cpu)
			}
			if (tc.spec.PodTemplateRef != nil) != (r.TemplateRef != nil && *r.TemplateGeneration == 3) {
				t.Errorf("template ref %v generation %v", r.TemplateRef, r.TemplateGeneration)
			}
		})
	}
}

// A template whose pod-level resources (spec.resources) are limits only is
// resolved with those limits as requests, as the API server defaults a real
// pod: the fake pods take the room, and spec.limits counts it.
func TestResolvePodLevelLimits(t *testing.T) {
	tmpl := podSpec("100m", false)
	tmpl.Spec.Resources = &apiv1.ResourceRequirements{Limits: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("2")}}
	src := testSources(t)
	src.PodTemplates = corelisters.NewPodTemplateLister(func() cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		if err := i.Add(&apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "pod-level"}, Template: tmpl}); err != nil {
			t.Fatal(err)
		}
		return i
	}())
	limits := v1beta1.ResourceList{v1beta1.ResourceName(apiv1.ResourceCPU): resource.MustParse("7")}
	b := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "b"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "pod-level"}, Limits: &limits}}
	r, err := src.Resolve(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Template.Spec.Resources.Requests[apiv1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("pod-level cpu request %v, want the limit 2", got.String())
	}
	if r.Replicas != 3 {
		t.Errorf("%d replicas under a 7-cpu limit, want 3 pods of 2 cpu", r.Replicas)
	}
}
