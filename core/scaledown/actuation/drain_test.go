package actuation

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
)

// An evicted pod gets its own termination grace period, capped at
// --max-graceful-termination-sec.
func TestEvictionGracePeriod(t *testing.T) {
	cases := []struct {
		name  string
		pod   *int64 // the pod's terminationGracePeriodSeconds
		flag  int
		grace int64
	}{
		{name: "the pod's own, under the cap", pod: ptr.To[int64](30), flag: 600, grace: 30},
		{name: "capped by the flag", pod: ptr.To[int64](900), flag: 600, grace: 600},
		{name: "none set: the flag", pod: nil, flag: 120, grace: 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, unneeded := emptyGroup(1)
			pod := c.Pod("light", 200, "rs-light", "g1-n0")
			pod.Spec.TerminationGracePeriodSeconds = tc.pod
			kube := sdtest.NewKube(c.Objects()...)
			unneeded[0].Empty, unneeded[0].PodsToEvict = false, []*apiv1.Pod{pod}
			opts := config.Defaults()
			opts.NodeDeleteDelayAfterTaint = 0
			opts.MaxGracefulTerminationSec = tc.flag
			a := New(opts, Deps{Kube: kube, Provider: c.Provider, Outcomes: &sdtest.Outcomes{}, Removals: deletiontracker.New()},
				Synchronous(), WithPacing(5*time.Millisecond, 5*time.Millisecond))

			a.Drain(context.Background(), unneeded)

			if got, ok := kube.Grace("default/light"); !ok || got != tc.grace {
				t.Fatalf("eviction grace period = %d (sent: %v), want %d", got, ok, tc.grace)
			}
		})
	}
}

// With --drain-priority-config, the DaemonSet pods of an empty node are
// evicted each with its own priority group's grace period, as upstream's
// EvictDaemonSetPods does, not all with the lowest group's.
func TestEmptyNodeDaemonSetPodsByDrainPriority(t *testing.T) {
	c, unneeded := emptyGroup(1)
	low := test.BuildDaemonSetPod("ds-low", 100, 64*test.MiB, "logs", "g1-n0")
	high := test.BuildDaemonSetPod("ds-high", 100, 64*test.MiB, "csi", "g1-n0")
	high.Spec.Priority = ptr.To[int32](2000001000)
	c.Pods = append(c.Pods, low, high)
	kube := sdtest.NewKube(c.Objects()...)
	opts := config.Defaults()
	opts.NodeDeleteDelayAfterTaint = 0
	opts.DaemonSetEvictionForEmptyNodes = true
	opts.DrainPriorities = []config.DrainPriority{{Priority: 0, GracePeriodSeconds: 10}, {Priority: 1000, GracePeriodSeconds: 120}}
	a := New(opts, Deps{Kube: kube, Provider: c.Provider, Outcomes: &sdtest.Outcomes{}, Removals: deletiontracker.New()},
		Synchronous(), WithPacing(5*time.Millisecond, 5*time.Millisecond))

	a.DeleteEmpty(context.Background(), unneeded)

	for pod, want := range map[string]int64{"default/ds-low": 10, "default/ds-high": 120} {
		if got, ok := kube.Grace(pod); !ok || got != want {
			t.Errorf("%s: eviction grace period = %d (sent: %v), want %d", pod, got, ok, want)
		}
	}
}
