package core

import (
	"context"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/actuation"
)

// On a cluster that does not serve resource.k8s.io/v1, main turns DRA off:
// the caches then sync without the DRA informers, whose lists would fail
// forever, and a pending pod still scales a group up.
func TestWithoutTheDRAAPICachesSyncAndScaleUpRuns(t *testing.T) {
	p, objs := cluster(groupSpec{id: "ng", min: 1, max: 5, nodes: 1, milliCPU: 2000, mem: 4 * test.GiB})
	// The node's room is taken: the pending pod needs a new one.
	objs = append(objs, test.BuildScheduledPod("filler", 1000, test.GiB, "rs-filler", "ng-n0"),
		test.BuildPendingPod("big", 1500, test.GiB, "rs-big"))
	kube := sdtest.NewKube(sdtest.WithReplicaSets(objs)...).Clientset
	// The API server's answer for a group it does not serve.
	kube.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Group != "resource.k8s.io" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
	})
	opts := testOptions()
	opts.DynamicResourceAllocationEnabled = false
	a, err := newAutoscaler(opts, kube, p, record.NewFakeRecorder(1000), nil, clock.RealClock{}, actuation.Synchronous())
	if err != nil {
		t.Fatal(err)
	}
	// A guard against a hang, not a measure: with DRA informers the sync
	// never ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !a.startInformers(ctx) {
		t.Fatal("informer caches did not sync without the DRA API")
	}
	if err := a.RunOnce(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if got := increases(p); !reflect.DeepEqual(got, []string{"ng+1"}) {
		t.Fatalf("IncreaseSize calls = %v, want [ng+1]", got)
	}
}
