package main

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestPoolsCreatedNeeded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	life := func(size, class string, created, deleted int) doks.PoolLife {
		l := doks.PoolLife{Size: size, Labels: map[string]string{chaosClassKey: class}, ByAPI: true, Created: at(created)}
		if deleted >= 0 {
			l.Deleted = at(deleted)
		}
		return l
	}
	end := at(1000)
	for _, tc := range []struct {
		name                  string
		history               []doks.PoolLife
		wantCreated, wantNeed int
	}{
		{name: "none", history: nil},
		{name: "hand-made pools are neither", history: []doks.PoolLife{{Size: "s-2vcpu-4gb", Created: at(0)}}},
		{name: "one pool", history: []doks.PoolLife{life("s-2vcpu-4gb", "a", 0, 100)}, wantCreated: 1, wantNeed: 1},
		{name: "created again after its DELETE", history: []doks.PoolLife{
			life("s-2vcpu-4gb", "a", 0, 100), life("s-2vcpu-4gb", "a", 101, -1)}, wantCreated: 2, wantNeed: 2},
		{name: "a duplicate while the first lives", history: []doks.PoolLife{
			life("s-2vcpu-4gb", "a", 0, 100), life("s-2vcpu-4gb", "a", 50, 60)}, wantCreated: 2, wantNeed: 1},
		{name: "a duplicate of a pool never deleted", history: []doks.PoolLife{
			life("s-2vcpu-4gb", "a", 0, -1), life("s-2vcpu-4gb", "a", 500, 600)}, wantCreated: 2, wantNeed: 1},
		{name: "other size or class at once", history: []doks.PoolLife{
			life("s-2vcpu-4gb", "a", 0, 100), life("s-2vcpu-2gb", "a", 10, 100), life("s-2vcpu-4gb", "b", 10, 100)},
			wantCreated: 3, wantNeed: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, needed := poolsCreatedNeeded(tc.history, end)
			if created != tc.wantCreated || needed != tc.wantNeed {
				t.Errorf("created %d, needed %d; want %d, %d", created, needed, tc.wantCreated, tc.wantNeed)
			}
		})
	}
}

func TestLiveCreatedPoolsAreOrphans(t *testing.T) {
	now := time.Now()
	h := []doks.PoolLife{
		{Name: "base", Created: now},
		{Name: "deleted", ByAPI: true, Created: now, Deleted: now},
		{Name: "left", ByAPI: true, Created: now},
	}
	if got := liveCreatedPools(h); len(got) != 1 || got[0] != "left" {
		t.Errorf("orphans %v, want [left]", got)
	}
}

func TestCountEvictions(t *testing.T) {
	ev := func(uid, reason, msg string, count int32) apiv1.Event {
		return apiv1.Event{InvolvedObject: apiv1.ObjectReference{Kind: "Pod", UID: types.UID(uid)}, Reason: reason, Message: msg, Count: count}
	}
	const evicted = "deleting pod for node scale down"
	twice, pods := countEvictions([]apiv1.Event{
		ev("once", "ScaleDown", evicted, 1),
		ev("aggregated", "ScaleDown", evicted, 2),
		ev("two-events", "ScaleDown", evicted, 1),
		ev("two-events", "ScaleDown", evicted, 0),
		ev("other", "Scheduled", "assigned", 3),
	})
	if twice != 2 || pods != 3 {
		t.Errorf("twice %d of %d pods; want 2 of 3", twice, pods)
	}
}
