package core

import (
	"reflect"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
)

// failedGroupFixture returns 3 full nodes in "base", 4 pending pods that need a
// node each, and two empty groups; the priority expander prefers "a".
func failedGroupFixture(t *testing.T) (*test.Provider, *harness) {
	t.Helper()
	p, h := preferAOverB(t, 3, 4, 1500)
	h.runOnce(t0)
	if got := increases(p); !reflect.DeepEqual(got, []string{"a+4"}) {
		t.Fatalf("IncreaseSize calls = %v, want [a+4]", got)
	}
	failAllInstances(p, "a")
	return p, h
}

// failAllInstances puts every instance of the group in error, as DigitalOcean
// reports droplets that failed to create.
func failAllInstances(p *test.Provider, group string) {
	ins, _ := p.Group(group).Nodes()
	for _, in := range ins {
		p.Group(group).SetInstanceError(in.Id, &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "no-code-digitalocean", ErrorMessage: "droplet failed"})
	}
}

// 4 instances in error, against 3 ready nodes, that the cloud refuses to
// delete: whether the target could be lowered (the cloud keeps listing
// them anyway) or not, they do not make the cluster unhealthy. Group "a" is
// backed off and the pending pods go to "b" in the same loop. Deletion of
// instances still in the target is asked for again later, and succeeds
// once the cloud accepts it.
func TestFailedInstancesDoNotFreezeTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name            string
		decreaseRefused bool
	}{
		{"target lowered, instances still listed", false},
		{"target cannot be lowered either", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, h := failedGroupFixture(t)
			p.Group("a").InjectError("DeleteNodes", errString("droplet is locked"))
			if tc.decreaseRefused {
				p.Group("a").InjectError("DecreaseTargetSize", errString("pool is busy"))
			}
			h.runOnce(t0.Add(time.Minute))
			if !h.a.registry.IsClusterHealthy() {
				t.Fatalf("cluster unhealthy behind 4 failed instances: %+v", h.a.registry.TotalReadiness())
			}
			if got := increases(p); !reflect.DeepEqual(got, []string{"a+4", "b+4"}) {
				t.Fatalf("IncreaseSize calls = %v, want [a+4 b+4]: a backed off, its pods go to b", got)
			}
			if off, _, _ := h.a.registry.BackedOff("a", t0.Add(time.Minute)); !off {
				t.Fatal("group a not backed off")
			}
			st := h.a.registry.GetStatus(t0.Add(time.Minute))
			if st.ClusterWide.Health.Status != "Healthy" || st.ClusterWide.Health.NodeCounts.LongUnregistered != 4 {
				t.Fatalf("status health = %+v, want Healthy with 4 longUnregistered", st.ClusterWide.Health)
			}

			deletes := len(p.CallsOf("DeleteNodes"))
			h.runOnce(t0.Add(3 * time.Minute))
			retried := len(p.CallsOf("DeleteNodes")) > deletes
			if retried != tc.decreaseRefused {
				t.Fatalf("deletion asked again: %v, want %v (only while the instances are in the target)", retried, tc.decreaseRefused)
			}
			if !tc.decreaseRefused {
				return
			}
			p.Group("a").InjectError("DeleteNodes", nil)
			h.runOnce(t0.Add(5 * time.Minute))
			if ids := p.Group("a").InstanceIDs(); len(ids) != 0 {
				t.Fatalf("instances of a after the cloud accepted the deletion: %v", ids)
			}
			if ts, _ := p.Group("a").TargetSize(); ts != 0 {
				t.Fatalf("target of a = %d, want 0", ts)
			}
			if got := increases(p); len(got) != 2 {
				t.Fatalf("IncreaseSize calls = %v", got)
			}
		})
	}
}
