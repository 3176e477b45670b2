package informercache

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate"
)

// lastAppliedAnnotation is where kubectl apply keeps what it last applied:
// often the largest part of a workload, read by kubectl only.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// What each kind loses, and who may send one back (the package doc has the
// rule: nothing trimmed reaches the API server):
//
//   - Every kind: managedFields and kubectl's last-applied copy (Default).
//     Marked: an update without the annotation would delete it.
//   - Pods: besides, containers' env, command, probes and security
//     contexts, the pod's security context, projected volumes' sources,
//     most of the status. Marked; never written: evictions and deletions
//     name the pod.
//   - Nodes: managedFields and status only (images, addresses, system info,
//     most conditions). Not marked: the taint updates write cached nodes
//     back, and safely, since a Node update ignores the status and keeps
//     the stored managedFields when the request has none, and the metadata
//     and spec (kubectl's last-applied copy included) stay whole.
//   - PodTemplates and the templates of workloads (Templates): as pods'
//     specs, the template's metadata marked too, so that a pod made from
//     one carries the mark. The CapacityBuffer dry run, the one place a
//     template goes to the API server, reads the live object.
//
// What stays is what the scheduler framework's Filter plugins, the drain
// rules, utilization, the scale-up's pending-pod checks and the status
// writer read.

// Default is the transform of every informer without one of its own: it
// drops the managedFields and kubectl's last-applied copy, and marks the
// object.
func Default(obj any) (any, error) {
	switch o := obj.(type) {
	case *apiv1.Node:
		// Written back by the taint updates, whoever registered the
		// informer: only what a Node update keeps without it goes.
		o.ManagedFields = nil
	case metav1.Object:
		trimMeta(o)
	}
	return obj, nil
}

// trimMeta drops managedFields and kubectl's last-applied copy, and marks
// the object in their place.
func trimMeta(o metav1.Object) {
	if a := o.GetAnnotations(); a[lastAppliedAnnotation] != "" {
		delete(a, lastAppliedAnnotation)
	}
	mark(o)
}

// template is the transform of PodTemplates' and workloads' informers.
func template(obj any) (any, error) {
	obj, _ = Default(obj)
	var t *apiv1.PodTemplateSpec
	switch o := obj.(type) {
	case *apiv1.PodTemplate:
		t = &o.Template
	case *apiv1.ReplicationController:
		t = o.Spec.Template
	case *appsv1.ReplicaSet:
		t = &o.Spec.Template
	case *appsv1.Deployment:
		t = &o.Spec.Template
	case *appsv1.StatefulSet:
		t = &o.Spec.Template
	case *appsv1.DaemonSet:
		t = &o.Spec.Template
	case *batchv1.Job:
		t = &o.Spec.Template
	}
	if t != nil {
		mark(&t.ObjectMeta)
		trimPodSpec(&t.Spec)
	}
	return obj, nil
}

// pod is the transform of the pods' informer.
func (c *Cache) pod(obj any) (any, error) {
	p, ok := obj.(*apiv1.Pod)
	if !ok {
		return Default(obj)
	}
	trimPod(p)
	c.tables.sharePod(p)
	return p, nil
}

// trimPod trims a pod: Default, then its spec and status.
func trimPod(p *apiv1.Pod) {
	trimMeta(p)
	trimPodSpec(&p.Spec)
	trimPodStatus(&p.Status, p.Spec.NodeName != "")
}

// node is the transform of the nodes' informer.
func (c *Cache) node(obj any) (any, error) {
	n, ok := obj.(*apiv1.Node)
	if !ok {
		return Default(obj)
	}
	trimNode(n)
	c.tables.shareNode(n)
	return n, nil
}

// trimNode drops a node's managedFields and status fields nothing reads,
// and nothing else: see the header.
func trimNode(n *apiv1.Node) {
	n.ManagedFields = nil
	trimNodeStatus(&n.Status)
}

// trimPodSpec trims every container of the spec (trimContainers), empties
// projected volumes (trimProjectedVolumes) and drops the pod's security
// context, which no Filter plugin reads (the API server gives every pod
// one, if only an empty one: 136 bytes a pod).
func trimPodSpec(s *apiv1.PodSpec) {
	s.SecurityContext = nil
	trimContainers(s.InitContainers)
	trimContainers(s.Containers)
	trimProjectedVolumes(s.Volumes)
}

// trimProjectedVolumes drops the sources of projected volumes: the
// service-account token, CA bundle and namespace that admission adds to
// nearly every pod as kube-api-access-*, about 700 bytes each. The volume
// stays, so a pod's volumes keep their names and kinds; the Filter plugins
// read PVCs, ephemeral and in-tree disk volumes, and the drain rules
// emptyDir and hostPath volumes, none of them a projection.
func trimProjectedVolumes(vs []apiv1.Volume) {
	for i := range vs {
		if p := vs[i].Projected; p != nil && p.Sources != nil {
			vs[i].Projected = &apiv1.ProjectedVolumeSource{DefaultMode: p.DefaultMode}
		}
	}
}

// trimContainers drops what only the kubelet reads of a container: its
// environment, command, arguments, probes, lifecycle hooks and security
// context, often most of a real pod's size. Resources (claims included),
// ports and restart policy (sidecars' requests) are what the scheduler's
// Filter plugins read; they stay, as does every other field.
func trimContainers(cs []apiv1.Container) {
	for i := range cs {
		c := &cs[i]
		c.Env, c.EnvFrom, c.Command, c.Args = nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		c.SecurityContext = nil
	}
}

// trimPodStatus keeps the phase, an unbound pod's PodScheduled condition
// without its message (scale-up reads its status and reason; nothing reads
// a bound pod's conditions, nor any pod's Ready, ContainersReady,
// Initialized or others: a running pod's five cost about 750 bytes), the
// nominated node (preemption), the pod's and its containers' resources (the
// scheduler's requests of a pod being resized in place come from them) and
// the claim statuses (DRA). Gone: IPs, start time, the message, the QoS
// class and each container's image, ID, state and readiness.
func trimPodStatus(s *apiv1.PodStatus, bound bool) {
	s.Message = ""
	s.HostIP, s.HostIPs, s.PodIP, s.PodIPs = "", nil, "", nil
	s.StartTime = nil
	s.QOSClass = ""
	s.EphemeralContainerStatuses = nil
	if bound {
		s.Conditions = nil
	} else {
		s.Conditions = trimPodConditions(s.Conditions)
	}
	s.InitContainerStatuses = trimContainerStatuses(s.InitContainerStatuses)
	s.ContainerStatuses = trimContainerStatuses(s.ContainerStatuses)
}

// trimPodConditions keeps PodScheduled, without its message.
func trimPodConditions(in []apiv1.PodCondition) []apiv1.PodCondition {
	for _, c := range in {
		if c.Type == apiv1.PodScheduled {
			c.Message = ""
			return []apiv1.PodCondition{c}
		}
	}
	return nil
}

// trimContainerStatuses keeps of each status what resource.PodRequests
// reads: the name, the resources applied and allocated. A status reporting
// neither counts as no status there (the spec's requests apply), so it goes,
// and with it the list of a pod that is not being resized: every running
// pod's, in most clusters.
func trimContainerStatuses(in []apiv1.ContainerStatus) []apiv1.ContainerStatus {
	var out []apiv1.ContainerStatus
	for _, c := range in {
		if c.Resources != nil || c.AllocatedResources != nil {
			out = append(out, apiv1.ContainerStatus{Name: c.Name, Resources: c.Resources, AllocatedResources: c.AllocatedResources})
		}
	}
	return out
}

// trimNodeStatus drops the images (a kubelet reports up to 50, the largest
// part of a node object; ImageLocality is a Score plugin the simulation does
// not run), the volumes attached and in use, the system info, addresses,
// daemon endpoints and config, and the conditions readiness does not read
// (below). Capacity, allocatable, phase, features and declared features
// stay.
func trimNodeStatus(s *apiv1.NodeStatus) {
	s.Images = nil
	s.VolumesAttached, s.VolumesInUse = nil, nil
	s.NodeInfo = apiv1.NodeSystemInfo{}
	s.Addresses = nil
	s.DaemonEndpoints = apiv1.NodeDaemonEndpoints{}
	s.Config = nil
	s.Conditions = trimNodeConditions(s.Conditions)
}

// trimNodeConditions keeps the conditions readiness reads
// (clusterstate.ReadinessConditions) with their status, reason and last
// transition: not MemoryPressure or PIDPressure (the scheduler reads their
// taints), nor any condition's message or heartbeat. The heartbeat is the
// one field a kubelet changes on every status update; the snapshot ignores
// it already.
func trimNodeConditions(in []apiv1.NodeCondition) []apiv1.NodeCondition {
	n := 0
	for _, c := range in {
		if clusterstate.ReadinessConditions[c.Type] {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]apiv1.NodeCondition, 0, n)
	for _, c := range in {
		if clusterstate.ReadinessConditions[c.Type] {
			c.Message, c.LastHeartbeatTime = "", metav1.Time{}
			out = append(out, c)
		}
	}
	return out
}
