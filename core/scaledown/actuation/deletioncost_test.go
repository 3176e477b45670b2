package actuation

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
)

// A pod gone is no error; the pods beyond the count wait for the next
// loop; the others get the cost and the marker. (That a pod changed since
// the loop read it answers Conflict is the API server's part: the e2e test
// TestDeletionCostPatchIsConditional.)
func TestUpdateDeletionCostsWithinCount(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(test.BuildScheduledPod("first", 100, test.MiB, "rs", "n1"), test.BuildScheduledPod("third", 100, test.MiB, "rs", "n1"))
	read := func(name string) *apiv1.Pod {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := test.BuildScheduledPod("gone", 100, test.MiB, "rs", "n1")
	mark := []scaledown.PodOnNode{{Pod: read("first"), Node: "n1"}, {Pod: gone, Node: "n1"}, {Pod: read("third"), Node: "n1"}}
	res := UpdateDeletionCosts(ctx, kube, mark, nil, SoftTaintBudget{Count: 2, Time: time.Minute}, time.Now)
	if len(res.Errors) != 0 || len(res.Marked) != 1 || res.Marked[0] != "default/first" || res.Skipped != 1 {
		t.Fatalf("result %+v, want first marked, third skipped (count), gone no error", res)
	}
	if a := read("first").Annotations; a[scaledown.PodDeletionCostKey] != scaledown.UnneededPodDeletionCost || a[scaledown.UnneededNodeKey] != "n1" {
		t.Errorf("first: annotations %v", a)
	}
	if a := read("third").Annotations; len(a) != 0 {
		t.Errorf("third, beyond the count: annotations %v", a)
	}
}
