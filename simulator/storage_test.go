package simulator

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	. "github.com/doks-autoscaler/cluster-autoscaler/simulator/testutil"
)

func withClaim(p *apiv1.Pod, claim string) *apiv1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, apiv1.Volume{Name: "data", VolumeSource: apiv1.VolumeSource{
		PersistentVolumeClaim: &apiv1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return p
}

// A PV pinned to node n1 (local volume style) and its bound claim.
func pinnedVolume() (*apiv1.PersistentVolume, *apiv1.PersistentVolumeClaim) {
	pv := &apiv1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: apiv1.PersistentVolumeSpec{
			Capacity:    apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes: []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
			PersistentVolumeSource: apiv1.PersistentVolumeSource{
				CSI: &apiv1.CSIPersistentVolumeSource{Driver: "dobs.csi.digitalocean.com", VolumeHandle: "vol-1"}},
			ClaimRef: &apiv1.ObjectReference{Namespace: "default", Name: "data"},
			NodeAffinity: &apiv1.VolumeNodeAffinity{Required: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
				MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: apiv1.LabelHostname, Operator: apiv1.NodeSelectorOpIn, Values: []string{"n1"}}},
			}}}},
		},
		Status: apiv1.PersistentVolumeStatus{Phase: apiv1.VolumeBound},
	}
	pvc := &apiv1.PersistentVolumeClaim{
		// The PV controller marks a finished binding with this annotation.
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: apiv1.PersistentVolumeClaimSpec{
			AccessModes: []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
			Resources:   apiv1.VolumeResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("10Gi")}},
			VolumeName:  "pv-data",
		},
		Status: apiv1.PersistentVolumeClaimStatus{Phase: apiv1.ClaimBound},
	}
	return pv, pvc
}

func TestDefaultCheckerIgnoresClaims(t *testing.T) {
	// Without storage informers, a pod with a claim is judged on everything
	// else: it must not be called unschedulable for a claim it cannot see.
	c := testChecker(t)
	s := snapshotOf(t, []*apiv1.Node{Node("n1", 4000, 4*GiB)}, nil)
	if err := c.CheckPredicates(s, withClaim(Pod("p", 100, MiB), "data"), "n1"); err != nil {
		t.Errorf("pod with a claim should fit: %v", err)
	}
}

func TestInformerCheckerUsesVolumes(t *testing.T) {
	pv, pvc := pinnedVolume()
	client := fake.NewClientset(pv, pvc)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewPredicateCheckerWithInformers(factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}

	s := snapshotOf(t, []*apiv1.Node{Node("n1", 4000, 4*GiB), Node("n2", 4000, 4*GiB)}, nil)
	pod := withClaim(Pod("p", 100, MiB), "data")
	if err := c.CheckPredicates(s, pod, "n1"); err != nil {
		t.Errorf("pod should fit the node its volume is pinned to: %v", err)
	}
	perr := c.CheckPredicates(s, pod, "n2")
	if perr == nil || perr.PluginName() != "VolumeBinding" {
		t.Errorf("pod must not fit a node its volume cannot reach, got %v", perr)
	}
	if perr := c.CheckPredicates(s, withClaim(Pod("q", 100, MiB), "missing"), "n1"); perr == nil {
		t.Errorf("a pod whose claim does not exist cannot be scheduled")
	}
	if got := len(c.Plugins()); got != len(BasePlugins)+len(StoragePlugins) {
		t.Errorf("plugins = %v", c.Plugins())
	}
	// Plain pods are unaffected.
	if err := c.CheckPredicates(s, Pod("plain", 100, MiB), "n2"); err != nil {
		t.Errorf("plain pod: %v", err)
	}
}
