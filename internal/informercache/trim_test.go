package informercache

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// The cache keeps what the autoscaler reads of a pod: a pod being resized
// in place is counted with the requests its containers' statuses report,
// a pending pod is still unschedulable, a nominated one still nominated;
// what it does not read is gone.
func TestTrimKeepsWhatIsRead(t *testing.T) {
	now := metav1.Now()
	pod := test.BuildPendingPod("p", 500, 64*test.MiB, "rs")
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.Status.Conditions[0].Message = "0/1000 nodes are available: 1000 Insufficient cpu."
	pod.Status.Conditions = append(pod.Status.Conditions, apiv1.PodCondition{Type: apiv1.PodInitialized, Status: apiv1.ConditionTrue},
		apiv1.PodCondition{Type: apiv1.PodReady, Status: apiv1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"})
	pod.Status.NominatedNodeName = "n1"
	pod.Annotations = map[string]string{lastAppliedAnnotation: `{"kind":"Pod"}`, "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
	pod.Spec.Containers[0].Env = []apiv1.EnvVar{{Name: "MODE", Value: "batch"}}
	pod.Spec.Containers[0].Command = []string{"/app"}
	pod.Spec.Containers[0].ReadinessProbe = &apiv1.Probe{PeriodSeconds: 5}
	nonRoot := true
	pod.Spec.SecurityContext = &apiv1.PodSecurityContext{RunAsNonRoot: &nonRoot}
	pod.Spec.Containers[0].SecurityContext = &apiv1.SecurityContext{RunAsNonRoot: &nonRoot}
	pod.Spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	pod.Status.PodIP, pod.Status.HostIP, pod.Status.StartTime = "10.0.0.1", "10.1.0.1", &now
	expiry := int64(3607)
	pod.Spec.Volumes = []apiv1.Volume{
		{Name: "scratch", VolumeSource: apiv1.VolumeSource{EmptyDir: &apiv1.EmptyDirVolumeSource{}}},
		{Name: "kube-api-access-x", VolumeSource: apiv1.VolumeSource{Projected: &apiv1.ProjectedVolumeSource{Sources: []apiv1.VolumeProjection{
			{ServiceAccountToken: &apiv1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &apiv1.ConfigMapProjection{LocalObjectReference: apiv1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
		}}}},
	}
	pod.Status.ContainerStatuses = []apiv1.ContainerStatus{{
		Name: pod.Spec.Containers[0].Name, Image: "registry/app:1", ContainerID: "containerd://x", Ready: true,
		State:              apiv1.ContainerState{Running: &apiv1.ContainerStateRunning{StartedAt: now}},
		AllocatedResources: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("800m")},
		Resources:          &apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("800m")}},
	}}
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
	before := resourcehelper.PodRequests(pod, opts)

	obj, err := transform(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*apiv1.Pod)
	if after := resourcehelper.PodRequests(got, opts); !after.Cpu().Equal(*before.Cpu()) || after.Cpu().MilliValue() != 800 {
		t.Errorf("requests after trimming %v, before %v (want the resized 800m)", after.Cpu(), before.Cpu())
	}
	if !unschedulable(got) || got.Status.NominatedNodeName != "n1" || got.Status.Phase != apiv1.PodPending {
		t.Errorf("pending pod's scheduling state lost: %+v", got.Status)
	}
	if c := got.Spec.Containers[0]; len(c.Ports) != 1 || c.Ports[0].HostPort != 8080 || c.Resources.Requests.Cpu().MilliValue() != 500 {
		t.Errorf("what the scheduler reads of the container lost: %+v", c)
	}
	if _, ok := got.Annotations[lastAppliedAnnotation]; ok || got.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "true" {
		t.Errorf("annotations after trimming %v: want kubectl's last-applied copy gone, the rest kept", got.Annotations)
	}
	if v := got.Spec.Volumes; len(v) != 2 || v[0].EmptyDir == nil || v[1].Name != "kube-api-access-x" || v[1].Projected == nil {
		t.Errorf("volumes the drain rules and Filter plugins read lost: %+v", v)
	} else if v[1].Projected.Sources != nil {
		t.Errorf("projected sources kept: %+v", v[1].Projected)
	}
	cs := got.Status.ContainerStatuses[0]
	if !IsTrimmed(got) || len(got.ManagedFields) != 1 || got.Status.PodIP != "" || got.Status.HostIP != "" || got.Status.StartTime != nil ||
		got.Spec.Containers[0].Env != nil || got.Spec.Containers[0].Command != nil || got.Spec.Containers[0].ReadinessProbe != nil ||
		got.Spec.SecurityContext != nil || got.Spec.Containers[0].SecurityContext != nil ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Message != "" || cs.Image != "" || cs.ContainerID != "" || cs.State.Running != nil {
		t.Errorf("unread fields kept: %+v", got.Status)
	}
}

// A bound pod keeps no conditions: scale-up reads PodScheduled of unbound
// pods only, and the same pod unbound keeps it.
func TestTrimDropsBoundPodsConditions(t *testing.T) {
	bound := test.BuildScheduledPod("p", 500, 64*test.MiB, "rs", "n1")
	bound.Status.Conditions = []apiv1.PodCondition{
		{Type: apiv1.PodScheduled, Status: apiv1.ConditionTrue},
		{Type: apiv1.PodReady, Status: apiv1.ConditionTrue},
	}
	obj, err := transform(bound.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*apiv1.Pod); got.Status.Conditions != nil || got.Spec.NodeName != "n1" || unschedulable(got) {
		t.Errorf("bound pod after trimming: node %q, conditions %+v; want n1 and none", got.Spec.NodeName, got.Status.Conditions)
	}
	unbound := bound.DeepCopy()
	unbound.Spec.NodeName = ""
	unbound.Status.Conditions[0] = apiv1.PodCondition{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse, Reason: apiv1.PodReasonUnschedulable}
	obj, err = transform(unbound)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*apiv1.Pod); len(got.Status.Conditions) != 1 || !unschedulable(got) {
		t.Errorf("unbound pod's conditions after trimming %+v, want PodScheduled=False/Unschedulable", got.Status.Conditions)
	}
}

// A node keeps what the simulation, readiness and templates read (capacity,
// allocatable, conditions, declared features); its images and system info go.
func TestTrimNode(t *testing.T) {
	node := test.BuildNode("n1", 2000, 4*test.GiB)
	node.Status.Images = []apiv1.ContainerImage{{Names: []string{"registry/app:1"}, SizeBytes: 1 << 20}}
	node.Status.NodeInfo = apiv1.NodeSystemInfo{KubeletVersion: "v1.35.0", OSImage: "Debian"}
	node.Status.Addresses = []apiv1.NodeAddress{{Type: apiv1.NodeInternalIP, Address: "10.1.0.1"}}
	node.Status.DeclaredFeatures = []string{"InPlacePodVerticalScaling"}
	node.Annotations = map[string]string{lastAppliedAnnotation: `{"kind":"Node"}`, "csi.volume.kubernetes.io/nodeid": "{}"}
	heartbeat := metav1.Now()
	for i := range node.Status.Conditions {
		node.Status.Conditions[i].Message, node.Status.Conditions[i].LastHeartbeatTime = "kubelet is posting ready status", heartbeat
	}
	node.Status.Conditions = append(node.Status.Conditions,
		apiv1.NodeCondition{Type: apiv1.NodeMemoryPressure, Status: apiv1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		apiv1.NodeCondition{Type: apiv1.NodeDiskPressure, Status: apiv1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "kubelet has disk pressure"})
	want := node.Status.DeepCopy()

	obj, err := transform(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*apiv1.Node)
	if got.Status.Images != nil || got.Status.NodeInfo.KubeletVersion != "" || got.Status.Addresses != nil {
		t.Errorf("unread fields kept: %+v", got.Status)
	}
	if !got.Status.Allocatable.Cpu().Equal(*want.Allocatable.Cpu()) || !got.Status.Capacity.Memory().Equal(*want.Capacity.Memory()) ||
		len(got.Status.DeclaredFeatures) != 1 || got.Annotations["csi.volume.kubernetes.io/nodeid"] != "{}" {
		t.Errorf("read fields lost: %+v", got.Status)
	}
	if got.Annotations[lastAppliedAnnotation] == "" {
		t.Errorf("a node's last-applied copy dropped: the taint updates write the cached node back whole")
	}
	// Readiness reads Ready, DiskPressure and NetworkUnavailable; the rest,
	// messages and heartbeats go.
	var types []apiv1.NodeConditionType
	for _, c := range got.Status.Conditions {
		types = append(types, c.Type)
		if c.Message != "" || !c.LastHeartbeatTime.IsZero() {
			t.Errorf("condition %s keeps its message or heartbeat: %+v", c.Type, c)
		}
	}
	if want := []apiv1.NodeConditionType{apiv1.NodeReady, apiv1.NodeDiskPressure}; fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("conditions %v after trimming, want %v", types, want)
	}
	wantReady, wantSince := clusterstate.NodeReadiness(node)
	if ready, since := clusterstate.NodeReadiness(got); ready != wantReady || !since.Equal(wantSince) || ready {
		t.Errorf("readiness after trimming %v since %v, before %v since %v (want not ready: disk pressure)", ready, since, wantReady, wantSince)
	}
	got.Status.Conditions = got.Status.Conditions[:1]
	if ready, _ := clusterstate.NodeReadiness(got); !ready {
		t.Errorf("a ready node is not ready after trimming")
	}
}

// The taint updates write cached nodes back whole: trimming leaves every
// field such an update writes (all but the status, which a node update
// ignores, and managedFields, which an update without them keeps).
func TestNodeTrimLeavesWhatANodeUpdateWrites(t *testing.T) {
	node := test.BuildNode("n1", 2000, 4*test.GiB)
	node.Labels = map[string]string{"doks.digitalocean.com/node-pool": "web", apiv1.LabelHostname: "n1"}
	node.Annotations = map[string]string{lastAppliedAnnotation: `{"kind":"Node"}`, "node.alpha.kubernetes.io/ttl": "0"}
	node.Finalizers = []string{"example.com/keep"}
	node.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Example", Name: "owner", UID: "u"}}
	node.ResourceVersion, node.Generation = "42", 3
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	node.Spec = apiv1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}, ProviderID: "digitalocean://1",
		Unschedulable: true, Taints: []apiv1.Taint{{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoSchedule}},
		ConfigSource: &apiv1.NodeConfigSource{}}
	want := node.DeepCopy()
	want.ManagedFields = nil // an update without them keeps the stored ones

	obj, err := transform(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*apiv1.Node)
	if !equality.Semantic.DeepEqual(got.ObjectMeta, want.ObjectMeta) {
		t.Errorf("metadata trimmed, and a taint update would write it:\n got %+v\nwant %+v", got.ObjectMeta, want.ObjectMeta)
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("spec trimmed, and a taint update would write it:\n got %+v\nwant %+v", got.Spec, want.Spec)
	}
}

// A pod not being resized keeps no container status at all; one being
// resized keeps the statuses that carry resources.
func TestTrimContainerStatuses(t *testing.T) {
	running := apiv1.ContainerStatus{Name: "app", Image: "registry/app:1", Ready: true}
	resized := apiv1.ContainerStatus{Name: "side", AllocatedResources: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("300m")}}
	for _, tc := range []struct {
		name     string
		statuses []apiv1.ContainerStatus
		want     []string
	}{
		{"none", nil, nil},
		{"running, not resized", []apiv1.ContainerStatus{running}, nil},
		{"one of two resized", []apiv1.ContainerStatus{running, resized}, []string{"side"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := test.BuildScheduledPod("p", 100, test.MiB, "rs", "n1")
			pod.Spec.Containers = append(pod.Spec.Containers, apiv1.Container{Name: "side",
				Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("200m")}}})
			pod.Status.ContainerStatuses = tc.statuses
			opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
			before := resourcehelper.PodRequests(pod, opts)
			obj, _ := transform(pod.DeepCopy())
			got := obj.(*apiv1.Pod)
			var names []string
			for _, c := range got.Status.ContainerStatuses {
				names = append(names, c.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Errorf("statuses kept %v, want %v", names, tc.want)
			}
			if after := resourcehelper.PodRequests(got, opts); !after.Cpu().Equal(*before.Cpu()) {
				t.Errorf("requests %v after trimming, %v before", after.Cpu(), before.Cpu())
			}
		})
	}
}

// Workloads' pod templates lose what only the kubelet reads of a container,
// as pods do; what a simulated pod made from them needs stays.
func TestTrimWorkloadTemplates(t *testing.T) {
	spec := func() apiv1.PodTemplateSpec {
		return apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{
			InitContainers: []apiv1.Container{{Name: "init", Command: []string{"/init"}, Env: []apiv1.EnvVar{{Name: "A", Value: "1"}}}},
			Containers: []apiv1.Container{{Name: "app", Args: []string{"--big"}, Env: []apiv1.EnvVar{{Name: "B", Value: "2"}},
				LivenessProbe: &apiv1.Probe{PeriodSeconds: 10},
				Ports:         []apiv1.ContainerPort{{ContainerPort: 80, HostPort: 80}},
				Resources:     apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("250m")}}}},
		}}
	}
	rcTemplate := spec()
	for _, tc := range []struct {
		obj      interface{}
		template func(interface{}) apiv1.PodSpec
	}{
		{&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: spec()}}, func(o interface{}) apiv1.PodSpec { return o.(*appsv1.ReplicaSet).Spec.Template.Spec }},
		{&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: spec()}}, func(o interface{}) apiv1.PodSpec { return o.(*appsv1.Deployment).Spec.Template.Spec }},
		{&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: spec()}}, func(o interface{}) apiv1.PodSpec { return o.(*appsv1.StatefulSet).Spec.Template.Spec }},
		{&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: spec()}}, func(o interface{}) apiv1.PodSpec { return o.(*appsv1.DaemonSet).Spec.Template.Spec }},
		{&batchv1.Job{Spec: batchv1.JobSpec{Template: spec()}}, func(o interface{}) apiv1.PodSpec { return o.(*batchv1.Job).Spec.Template.Spec }},
		{&apiv1.ReplicationController{Spec: apiv1.ReplicationControllerSpec{Template: &rcTemplate}}, func(o interface{}) apiv1.PodSpec { return o.(*apiv1.ReplicationController).Spec.Template.Spec }},
		{&apiv1.PodTemplate{Template: spec()}, func(o interface{}) apiv1.PodSpec { return o.(*apiv1.PodTemplate).Template.Spec }},
	} {
		t.Run(fmt.Sprintf("%T", tc.obj), func(t *testing.T) {
			obj, err := transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			s := tc.template(obj)
			init, app := s.InitContainers[0], s.Containers[0]
			if init.Command != nil || init.Env != nil || app.Args != nil || app.Env != nil || app.LivenessProbe != nil {
				t.Errorf("kubelet-only fields kept: %+v %+v", init, app)
			}
			if app.Name != "app" || len(app.Ports) != 1 || app.Resources.Requests.Cpu().MilliValue() != 250 {
				t.Errorf("what a simulated pod needs lost: %+v", app)
			}
		})
	}
}

// transform runs the transform the object's informer gets.
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *apiv1.Pod:
		return New().pod(o)
	case *apiv1.Node:
		return New().node(o)
	}
	return template(obj)
}

// unschedulable is how scale-up reads a pending pod (pending.IsUnschedulable):
// unbound, PodScheduled false for the reason Unschedulable.
func unschedulable(p *apiv1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable
		}
	}
	return false
}
