package main

import (
	"slices"
	"testing"
	"time"
)

func TestDiurnalReplicasFollowTheCurve(t *testing.T) {
	w := diurnalWorkload{trough: 2, peak: 10, peakHour: 12}
	if got := diurnalReplicas(w, 12*time.Hour, 0); got != 10 {
		t.Errorf("at the peak hour: %d, want 10", got)
	}
	if got := diurnalReplicas(w, 0, 0); got != 2 {
		t.Errorf("12 hours from the peak: %d, want 2", got)
	}
	if got := diurnalReplicas(w, 36*time.Hour, 0); got != 10 {
		t.Errorf("the curve repeats daily: %d, want 10", got)
	}
	if got := diurnalReplicas(w, 12*time.Hour, 0.1); got != 11 {
		t.Errorf("10%% noise at the peak: %d, want 11", got)
	}
	if got := diurnalReplicas(w, 0, -2); got != 0 {
		t.Errorf("never below 0: %d", got)
	}
}

func TestStepNoiseIsSeededAndBounded(t *testing.T) {
	if stepNoise(1, 2, 3, 0.1) != stepNoise(1, 2, 3, 0.1) {
		t.Error("the same seed, workload and step gave different noise")
	}
	if stepNoise(1, 2, 3, 0.1) == stepNoise(1, 2, 4, 0.1) {
		t.Error("two steps gave the same noise")
	}
	for k := range 1000 {
		if n := stepNoise(7, 0, k, 0.1); n < -0.25 || n > 0.25 {
			t.Fatalf("step %d: noise %g beyond 2.5 sd", k, n)
		}
	}
}

func TestDiurnalFlagsAreScaled(t *testing.T) {
	dc := diurnalConfig{compression: 120}
	flags := dc.diurnalFlags(2)
	for _, want := range []string{"--scan-interval=1s", "--scale-down-unneeded-time=5s", "--scale-down-delay-after-add=5s",
		"--max-node-provision-time=7.5s", "--node-delete-delay-after-taint=42ms", "--scale-down-delay-after-failure=1.5s"} {
		if !slices.Contains(flags, want) {
			t.Errorf("%s missing from %v", want, flags)
		}
	}
	if up := dc.upstreamFlags(); !slices.Contains(up, "--unremovable-node-recheck-timeout=2.5s") || !slices.Contains(up, "--max-node-startup-time=7.5s") {
		t.Errorf("upstream's own flags: %v", up)
	}
	cons := diurnalConfig{compression: 60}.consolidationFlags()
	for _, want := range []string{"--consolidation-stabilization-window=5s", "--consolidation-saving-horizon=1m0s",
		"--consolidation-workload-cooldown=1m0s", "--consolidation-eviction-cost=8.33333e-05"} {
		if !slices.Contains(cons, want) {
			t.Errorf("%s missing from %v", want, cons)
		}
	}
}

func TestEvictionsPerPodDay(t *testing.T) {
	if got := evictionsPerPodDay(18, 36); got != 0.5 {
		t.Errorf("18 evictions over a mean of 36 pods: %g, want 0.5", got)
	}
	if got := evictionsPerPodDay(3, 0); got != 0 {
		t.Errorf("no pods: %g", got)
	}
}

func TestDrainsOfFindsNodesBoughtAgain(t *testing.T) {
	nodes := map[string]nodeLife{
		"a":  {pool: "p4", size: "s-4vcpu-8gb", created: time.Hour},
		"b":  {pool: "p4", size: "s-4vcpu-8gb", created: 5 * time.Hour},
		"c":  {pool: "p8", size: "s-8vcpu-16gb", created: time.Hour},
		"a2": {pool: "p4", size: "s-4vcpu-8gb", created: 3*time.Hour + 20*time.Minute}, // 20m after a's drain
		"c2": {pool: "p2", size: "s-2vcpu-4gb", created: 6*time.Hour + 10*time.Minute}, // another pool
		"b2": {pool: "p4", size: "s-4vcpu-8gb", created: 9 * time.Hour},                // too late for b
	}
	evs := []eviction{
		{node: "a", at: 3*time.Hour + 1*time.Minute}, {node: "a", at: 3 * time.Hour},
		{node: "b", at: 7 * time.Hour},
		{node: "c", at: 6 * time.Hour},
	}
	consolidated := func(node string, at time.Duration) bool { return node == "c" && at == 6*time.Hour }
	got := drainsOf(evs, nodes, 30*time.Minute, consolidated)
	if len(got) != 3 {
		t.Fatalf("%d drains, want 3: %+v", len(got), got)
	}
	a, c, b := got[0], got[1], got[2]
	if a.node != "a" || a.evictions != 2 || a.at != 3*time.Hour || a.rebought != 3*time.Hour+20*time.Minute || a.cause != "scale-down" {
		t.Errorf("a: %+v", a)
	}
	if c.node != "c" || c.rebought != -1 || c.cause != "consolidation" {
		t.Errorf("c: %+v (a node of another pool is no rebuy)", c)
	}
	if b.node != "b" || b.rebought != -1 {
		t.Errorf("b: %+v (bought 2h later is no rebuy within 30m)", b)
	}
}

func TestIntegratorSteps(t *testing.T) {
	var g integrator
	t0 := time.Unix(0, 0)
	g.observe(t0, 2)
	g.observe(t0.Add(10*time.Second), 4)
	g.observe(t0.Add(20*time.Second), 0)
	if g.sum != 60 || g.mean() != 3 {
		t.Errorf("sum %g mean %g, want 60 and 3", g.sum, g.mean())
	}
}

func TestDayClock(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "00:00", 13*time.Hour + 5*time.Minute: "13:05", 25 * time.Hour: "+1d 01:00"} {
		if got := dayClock(d); got != want {
			t.Errorf("dayClock(%v) = %q, want %q", d, got, want)
		}
	}
}
