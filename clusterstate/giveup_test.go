package clusterstate

import (
	"reflect"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

func TestPlanGiveUp(t *testing.T) {
	const provision = 15 * time.Minute
	now := t0.Add(time.Hour)
	inst := func(id string) cloudprovider.Instance { return cloudprovider.Instance{Id: id} }
	failed := func(id, code string) cloudprovider.Instance {
		return cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{
			State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorCode: code, ErrorMessage: "no room"}}}
	}
	late := &ScaleUpRequest{GroupID: "g1", Increase: 3, Time: now.Add(-20 * time.Minute), ExpectedAddTime: now.Add(-5 * time.Minute)}
	onTime := &ScaleUpRequest{GroupID: "g1", Increase: 3, Time: now.Add(-5 * time.Minute), ExpectedAddTime: now.Add(10 * time.Minute)}
	// base: target 4, 2 registered, 2 instances still provisioning.
	base := func(edit func(*giveUpFacts)) giveUpFacts {
		f := giveUpFacts{Target: 4, Registered: 2, UpcomingUnregistered: 2, ProvisionTime: provision,
			Unregistered: []cloudprovider.Instance{inst("u1"), inst("u2")}, AllUnregistered: 2}
		edit(&f)
		return f
	}
	type want struct {
		giveUp    bool
		mismatch  mismatchClock
		instances []string
		decrease  int
		reason    GiveUpReason
		backOff   bool
		errorCode string
		timedOut  bool
	}
	cases := []struct {
		name string
		f    giveUpFacts
		want want
	}{
		{"nodes still provisioning, no request: wait", base(func(f *giveUpFacts) {}),
			want{mismatch: mismatchClear}},
		{"request within its deadline: wait", base(func(f *giveUpFacts) { f.Request = onTime }),
			want{mismatch: mismatchClear}},
		{"request past its deadline: give up all not registered, back off", base(func(f *giveUpFacts) {
			f.Request = late
			f.Errored = []cloudprovider.Instance{failed("e1", "quota")}
			f.LongUnregistered = []cloudprovider.Instance{inst("l1")}
		}), want{giveUp: true, instances: []string{"e1", "l1", "u1", "u2"}, decrease: 2,
			reason: GiveUpTimeout, backOff: true, errorCode: "timeout", timedOut: true}},
		{"request past its deadline, all registered: not a timeout", base(func(f *giveUpFacts) {
			f.Request, f.UpcomingUnregistered, f.Unregistered, f.AllUnregistered = late, 0, nil, 0
		}), want{mismatch: mismatchClear}},
		{"instance in error: at once, back off with the cloud's error", base(func(f *giveUpFacts) {
			f.Errored = []cloudprovider.Instance{failed("e1", "quota"), failed("e2", "other")}
			f.LongUnregistered = []cloudprovider.Instance{inst("l1")}
		}), want{giveUp: true, instances: []string{"e1", "e2", "l1"}, decrease: 2,
			reason: GiveUpCloudError, backOff: true, errorCode: "quota"}},
		{"instance in error, room for one: decrease capped at the registered nodes", base(func(f *giveUpFacts) {
			f.Target = 3
			f.Errored = []cloudprovider.Instance{failed("e1", "quota"), failed("e2", "quota")}
		}), want{giveUp: true, instances: []string{"e1", "e2"}, decrease: 1,
			reason: GiveUpCloudError, backOff: true, errorCode: "quota"}},
		{"long unregistered, no request: give up, no backoff", base(func(f *giveUpFacts) {
			f.LongUnregistered = []cloudprovider.Instance{inst("l1")}
		}), want{giveUp: true, instances: []string{"l1"}, decrease: 1,
			reason: GiveUpTimeout, errorCode: "timeout"}},
		{"long unregistered awaited by a request: back off", base(func(f *giveUpFacts) {
			f.Request = onTime
			f.LongUnregistered = []cloudprovider.Instance{inst("l1")}
		}), want{giveUp: true, instances: []string{"l1"}, decrease: 1,
			reason: GiveUpTimeout, backOff: true, errorCode: "timeout"}},
		{"long unregistered of a late request that has all nodes listed: request ends", base(func(f *giveUpFacts) {
			f.Request, f.UpcomingUnregistered = late, 0
			f.LongUnregistered = []cloudprovider.Instance{inst("l1")}
		}), want{giveUp: true, instances: []string{"l1"}, decrease: 1,
			reason: GiveUpTimeout, backOff: true, errorCode: "timeout", timedOut: true}},
		{"target above the listed nodes, first seen: start the clock", base(func(f *giveUpFacts) {
			f.Unregistered, f.AllUnregistered = nil, 0
		}), want{mismatch: mismatchStart}},
		{"target above the listed nodes within the provision time: keep waiting", base(func(f *giveUpFacts) {
			f.Unregistered, f.AllUnregistered = nil, 0
			f.MismatchSeen, f.MismatchSince = true, now.Add(-provision)
		}), want{mismatch: mismatchKeep}},
		{"target above the listed nodes past the provision time: lower it", base(func(f *giveUpFacts) {
			f.Unregistered, f.AllUnregistered = []cloudprovider.Instance{inst("u1")}, 1
			f.MismatchSeen, f.MismatchSince = true, now.Add(-provision-time.Second)
		}), want{giveUp: true, decrease: 1, reason: GiveUpTimeout}},
		{"given-up instances still listed: no mismatch", base(func(f *giveUpFacts) {
			f.Unregistered = nil // both given up earlier, the cloud lists them
			f.MismatchSeen, f.MismatchSince = true, now.Add(-time.Hour)
		}), want{mismatch: mismatchClear}},
		{"instances unknown: no mismatch", base(func(f *giveUpFacts) {
			f.Unregistered, f.AllUnregistered, f.ListFailed = nil, 0, true
			f.MismatchSeen, f.MismatchSince = true, now.Add(-time.Hour)
		}), want{mismatch: mismatchClear}},
		{"target above the listed nodes during a request: the request decides", base(func(f *giveUpFacts) {
			f.Unregistered, f.AllUnregistered, f.Request = nil, 0, onTime
			f.MismatchSeen, f.MismatchSince = true, now.Add(-time.Hour)
		}), want{mismatch: mismatchClear}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planGiveUp(c.f, now)
			var ids []string
			for _, in := range p.Instances {
				ids = append(ids, in.Id)
			}
			got := want{giveUp: p.giveUp, mismatch: p.mismatch, instances: ids, decrease: p.Decrease,
				reason: p.Reason, backOff: p.BackOff, errorCode: p.Info.ErrorCode, timedOut: p.RequestTimedOut}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("plan = %+v (why: %q)\nwant %+v", got, p.Why, c.want)
			}
		})
	}
}
