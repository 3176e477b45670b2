package consolidation

import (
	"testing"
	"time"

	sdtest "github.com/doks-autoscaler/cluster-autoscaler/core/internal/scaledowntest"
)

func TestTrendGrowthAndFall(t *testing.T) {
	const window = time.Hour
	cpu := func(m int64) Resources { return Resources{MilliCPU: m, MilliMemory: m * 1000} }
	for _, tc := range []struct {
		name    string
		minutes []int // sample times
		milli   []int64
		want    int64 // milli-cpu per hour
		falling bool
	}{
		{"rising 1 core over 30 min", []int{0, 10, 20, 30}, []int64{1000, 1300, 1700, 2000}, 2000, false},
		{"falling", []int{0, 20, 40}, []int64{3000, 2000, 1000}, 0, true},
		{"flat", []int{0, 20, 40}, []int64{3000, 2000, 3000}, 0, false},
		{"too short to read", []int{0, 5, 10}, []int64{3000, 2000, 1000}, 0, false},
		{"older than the window forgotten", []int{0, 50, 100, 110, 130}, []int64{9000, 1000, 1000, 2000, 3000}, 4000, false},
		{"one sample", []int{0}, []int64{1000}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Trend
			for i, m := range tc.minutes {
				tr.Observe(sdtest.T0.Add(time.Duration(m)*time.Minute), cpu(tc.milli[i]), window)
			}
			got := tr.Growth(window)
			if got.MilliCPU != tc.want || got.MilliMemory != tc.want*1000 {
				t.Fatalf("growth = %+v, want %d milli-cpu/h", got, tc.want)
			}
			if f := tr.Falling(window); f != tc.falling {
				t.Fatalf("falling = %v, want %v", f, tc.falling)
			}
		})
	}
}

// While the cluster's requests grow, deleting a node saves only until they
// need its room: the saving that paid over the learnt hour does not pay
// over the minutes the room lasts, and the rule says why.
func TestAppraiseWhileRequestsGrow(t *testing.T) {
	c := newCluster()
	c.node("a", 4000, 1, 1000)
	c.node("b", 4000, 1, 1000)
	cmd := &Command{Kind: Delete, Remove: c.candidates("a")[:1], Saving: 1, RemovedPrice: 1}
	d := Demand{Requested: Resources{MilliCPU: 2000, MilliMemory: 2000 * 4 * 1024 * 1024 * 1000}, Allocatable: Allocatable(c.nodes[0]).Plus(Allocatable(c.nodes[1]))}
	for _, tc := range []struct {
		name    string
		growth  int64 // milli-cpu per hour
		horizon time.Duration
		pays    bool
	}{
		{"flat", 0, time.Hour, true},
		{"slow growth: the room outlasts the horizon", 1000, time.Hour, true},
		{"fast growth: the room lasts 30 min", 4000, 30 * time.Minute, true},
		{"the room is needed at once", 1e9, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := CostModel{Horizon: time.Hour, EvictionCost: 0.01, Demand: d, Growth: Resources{MilliCPU: tc.growth}}
			a := m.Appraise(cmd)
			if a.Horizon.Round(time.Minute) != tc.horizon || a.Pays() != tc.pays || a.Growing != (tc.horizon < time.Hour) {
				t.Fatalf("appraisal %s (horizon %s, growing %v), want horizon %s, pays %v", a, a.Horizon, a.Growing, tc.horizon, tc.pays)
			}
		})
	}
}

// A reading is due once a sample slot (window/trendSamples) has passed;
// one that is not due replaces the newest sample, so the growth reads the
// newest requests whichever way they came.
func TestTrendReadingsDueOncePerSlot(t *testing.T) {
	var tr Trend
	window := 32 * time.Minute // slots of a minute
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	if !tr.Due(at, window) {
		t.Fatal("no sample yet, and a reading is not due")
	}
	tr.Observe(at, Resources{MilliCPU: 1000}, window)
	if tr.Due(at.Add(30*time.Second), window) {
		t.Error("a reading due half a slot after the last")
	}
	tr.Observe(at.Add(30*time.Second), Resources{MilliCPU: 1500}, window)
	if !tr.Due(at.Add(time.Minute), window) {
		t.Error("a reading not due a slot after the last")
	}
	for i := 2; i <= 16; i++ {
		tr.Observe(at.Add(time.Duration(i)*time.Minute), Resources{MilliCPU: 1500 + int64(i)*100}, window)
	}
	// From 1500m at 10:00 (the not-due reading replaced 1000m) to 3100m at
	// 10:16: 1600m in 16 minutes, 6000m an hour.
	if g := tr.Growth(window); g.MilliCPU != 6000 {
		t.Errorf("growth = %dm an hour, want 6000m", g.MilliCPU)
	}
}
