// Package fakepods is the seam where capacity APIs (CapacityBuffers,
// ProvisioningRequests) add pods to an iteration's simulation: a
// PodListProcessor gets the pending pods scale-up is about to place and
// returns the list to place, with pods of its own beside the real ones
// (upstream's processors/pods PodListProcessor, in this project's shape).
//
// Pods a processor makes up are fake: they exist only in the simulation.
// They are placed like real pending pods (on existing nodes first, where
// they stay for the rest of the iteration, so scale-down keeps that room;
// else they cause a scale-up), but they are never sent to the API server:
// no events name them (the reporter sends those to their Owner), no
// metric counts them as pending, nothing evicts or preempts for them.
package fakepods

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fake pods carry upstream's marker (simulator/fake).
const (
	FakePodAnnotationKey   = "podtype"
	FakePodAnnotationValue = "fakepod"
)

// Owner is the object a fake pod was made for (its controller: the
// CapacityBuffer or ProvisioningRequest), which events about the pod name
// in its place; nil when it has none.
func Owner(p *apiv1.Pod) *apiv1.ObjectReference {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil
	}
	return &apiv1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, Namespace: p.Namespace, UID: ref.UID}
}

// IsFake says whether a processor made p up.
func IsFake(p *apiv1.Pod) bool {
	return p != nil && p.Annotations[FakePodAnnotationKey] == FakePodAnnotationValue
}

// MarkFake marks p as made up by a processor.
func MarkFake(p *apiv1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[FakePodAnnotationKey] = FakePodAnnotationValue
}

// RequestsFromLimits gives spec a request for every resource it only has a
// limit for, in each container and at pod level (spec.resources), as the
// API server defaults a real pod (and upstream's fake pods, through
// SetDefaults_Pod), so that a fake pod takes the room the real one would: a
// template asking for nvidia.com/gpu as a limit alone needs a GPU in the
// simulation too. CapacityBuffers and ProvisioningRequests both make their
// fake pods' templates with it.
func RequestsFromLimits(spec *apiv1.PodSpec) {
	for _, cs := range [][]apiv1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			requestsFromLimits(&cs[i].Resources)
		}
	}
	if spec.Resources != nil {
		requestsFromLimits(spec.Resources)
	}
}

func requestsFromLimits(r *apiv1.ResourceRequirements) {
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = apiv1.ResourceList{}
		}
		r.Requests[name] = limit.DeepCopy()
	}
}

// HoldsRoomAnnotationKey marks a fake pod that only holds room (a booking):
// it is placed where it fits, on existing or upcoming nodes, before the
// pending pods, and never causes a scale-up of its own.
const HoldsRoomAnnotationKey = "cluster-autoscaler/holds-room-only"

// MarkHoldsRoomOnly marks p as a fake pod that only holds room.
func MarkHoldsRoomOnly(p *apiv1.Pod) {
	MarkFake(p)
	p.Annotations[HoldsRoomAnnotationKey] = "true"
}

// HoldsRoomOnly says whether p is a fake pod that never causes a scale-up.
func HoldsRoomOnly(p *apiv1.Pod) bool {
	return IsFake(p) && p.Annotations[HoldsRoomAnnotationKey] == "true"
}

// WithoutHoldsRoomOnly returns pods without those that only hold room, and
// how many it dropped.
func WithoutHoldsRoomOnly(pods []*apiv1.Pod) (rest []*apiv1.Pod, dropped int) {
	rest = make([]*apiv1.Pod, 0, len(pods))
	for _, p := range pods {
		if HoldsRoomOnly(p) {
			dropped++
			continue
		}
		rest = append(rest, p)
	}
	return rest, dropped
}

// Context is what an iteration tells the processors.
type Context struct {
	Now time.Time
}

// PodListProcessor changes the list of pending pods an iteration places.
// Real pods come first in the list it gets; processors append theirs, so
// real pods are placed first, except bookings: a processor that holds room
// already promised (ProvisioningRequests) puts its HoldsRoomOnly pods
// before the real ones, which then cannot take that room. A processor may
// also drop real pods that must not cause a scale-up of their own.
type PodListProcessor interface {
	Process(ctx *Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error)
	CleanUp()
}

// Combined runs processors in order, each on the previous one's output.
type Combined []PodListProcessor

// Process implements PodListProcessor.
func (c Combined) Process(ctx *Context, pending []*apiv1.Pod) ([]*apiv1.Pod, error) {
	var err error
	for _, p := range c {
		if pending, err = p.Process(ctx, pending); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// CleanUp implements PodListProcessor.
func (c Combined) CleanUp() {
	for _, p := range c {
		p.CleanUp()
	}
}
