package clusterstate

import (
	"errors"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

func TestLeftTarget(t *testing.T) {
	listed := []cloudprovider.Instance{{Id: "do://1"}, {Id: "do://2"}}
	cases := []struct {
		name       string
		instances  []cloudprovider.Instance
		deleting   map[string]bool
		listErr    error
		providerID string
		want       bool
	}{
		{"instance still listed: in the target", listed, nil, nil, "do://1", false},
		{"instance the cloud is deleting: left", listed, map[string]bool{"do://2": true}, nil, "do://2", true},
		{"instance the cloud dropped: left", listed, nil, nil, "do://3", true},
		{"node without provider ID, not listed: left", listed, nil, nil, "", true},
		{"instances unknown: counted in the target", nil, nil, errors.New("boom"), "do://3", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gs := &groupState{instances: c.instances, deletingIDs: c.deleting, nodesErr: c.listErr}
			if got := leftTarget(gs, c.providerID); got != c.want {
				t.Fatalf("leftTarget(%q) = %v, want %v", c.providerID, got, c.want)
			}
		})
	}
}

func TestUnregisteredState(t *testing.T) {
	const provision = 15 * time.Minute
	inError := cloudprovider.Instance{Id: "do://e", Status: &cloudprovider.InstanceStatus{
		State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorCode: "quota"}}}
	creating := cloudprovider.Instance{Id: "do://c", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}}
	noStatus := cloudprovider.Instance{Id: "do://n"}
	cases := []struct {
		name   string
		in     cloudprovider.Instance
		waited time.Duration
		want   unregState
	}{
		{"just seen", creating, 0, unregWaiting},
		{"exactly the provision time: still waited for", creating, provision, unregWaiting},
		{"past the provision time", creating, provision + time.Second, unregTooLong},
		{"no status, past the provision time", noStatus, provision + time.Second, unregTooLong},
		{"no status, young", noStatus, time.Minute, unregWaiting},
		{"in error: at once", inError, 0, unregErrored},
		{"in error beats too long", inError, 2 * provision, unregErrored},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := unregisteredState(c.in, t0, t0.Add(c.waited), provision); got != c.want {
				t.Fatalf("unregisteredState after %s = %v, want %v", c.waited, got, c.want)
			}
		})
	}
}

func TestUpcomingNodes(t *testing.T) {
	cases := []struct {
		name                                    string
		target, inTarget, longUnreg, notStarted int
		wantUnreg, wantUpcoming                 int
	}{
		{"at target", 3, 3, 0, 0, 0, 0},
		{"scale-up by 2 not registered", 5, 3, 0, 0, 2, 2},
		{"registered, not started yet, still upcoming", 5, 5, 0, 2, 0, 2},
		{"long unregistered are not upcoming", 5, 3, 1, 0, 1, 1},
		{"more nodes than target", 2, 4, 0, 1, 0, 1},
		{"long unregistered beyond the gap", 4, 3, 3, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unreg, upcoming := upcomingNodes(c.target, c.inTarget, c.longUnreg, c.notStarted)
			if unreg != c.wantUnreg || upcoming != c.wantUpcoming {
				t.Fatalf("upcomingNodes = (%d, %d), want (%d, %d)", unreg, upcoming, c.wantUnreg, c.wantUpcoming)
			}
		})
	}
}
