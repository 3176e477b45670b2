package config

import (
	"strings"
	"testing"
	"time"
)

func TestConsolidationFlagDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Consolidation
	if c.Enabled || c.SavingsThreshold != 0.1 || c.StabilizationWindow != 5*time.Minute || c.MaxDisrupted != (DisruptionBudget{Percent: 10, IsPercent: true}) || len(c.Windows) != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestConsolidationFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for success; else a part of the error, which names the flag
		check   func(t *testing.T, c ConsolidationOptions)
	}{
		{name: "all set", args: []string{"--consolidation-enabled", "--consolidation-savings-threshold=0.25",
			"--consolidation-stabilization-window=30s", "--consolidation-max-disrupted-nodes=20%",
			"--consolidation-windows=0 22 * * *=8h", "--consolidation-windows=*/30 9-17 * * 1-5=10m"},
			check: func(t *testing.T, c ConsolidationOptions) {
				if !c.Enabled || c.SavingsThreshold != 0.25 || c.StabilizationWindow != 30*time.Second {
					t.Errorf("got %+v", c)
				}
				if c.MaxDisrupted.Nodes(7) != 2 || c.MaxDisrupted.String() != "20%" {
					t.Errorf("20%% of 7 nodes: %d (%s), want 2", c.MaxDisrupted.Nodes(7), c.MaxDisrupted)
				}
				if len(c.Windows) != 2 || c.Windows[0].Duration != 8*time.Hour {
					t.Errorf("windows %+v", c.Windows)
				}
			}},
		{name: "count", args: []string{"--consolidation-max-disrupted-nodes=3"}, check: func(t *testing.T, c ConsolidationOptions) {
			if c.MaxDisrupted.Nodes(100) != 3 {
				t.Errorf("got %d", c.MaxDisrupted.Nodes(100))
			}
		}},
		{name: "zero allows none", args: []string{"--consolidation-max-disrupted-nodes=0%"}, check: func(t *testing.T, c ConsolidationOptions) {
			if c.MaxDisrupted.Nodes(100) != 0 {
				t.Errorf("got %d", c.MaxDisrupted.Nodes(100))
			}
		}},
		{name: "negative count", args: []string{"--consolidation-max-disrupted-nodes=-1"}, wantErr: "--consolidation-max-disrupted-nodes:"},
		{name: "percent over 100", args: []string{"--consolidation-max-disrupted-nodes=150%"}, wantErr: "--consolidation-max-disrupted-nodes:"},
		{name: "not a number", args: []string{"--consolidation-max-disrupted-nodes=some"}, wantErr: "--consolidation-max-disrupted-nodes:"},
		{name: "threshold 1", args: []string{"--consolidation-savings-threshold=1"}, wantErr: "--consolidation-savings-threshold must be"},
		{name: "threshold negative", args: []string{"--consolidation-savings-threshold=-0.1"}, wantErr: "--consolidation-savings-threshold must be"},
		{name: "window negative", args: []string{"--consolidation-stabilization-window=-1s"}, wantErr: "--consolidation-stabilization-window must not be negative"},
		{name: "horizon zero", args: []string{"--consolidation-saving-horizon=0s"}, wantErr: "--consolidation-saving-horizon must be positive"},
		{name: "eviction cost negative", args: []string{"--consolidation-eviction-cost=-0.01"}, wantErr: "--consolidation-eviction-cost must not be negative"},
		{name: "workload cooldown negative", args: []string{"--consolidation-workload-cooldown=-1m"}, wantErr: "--consolidation-workload-cooldown must not be negative"},
		{name: "cost model", args: []string{"--consolidation-saving-horizon=2h", "--consolidation-eviction-cost=0.02", "--consolidation-workload-cooldown=30m"}, check: func(t *testing.T, c ConsolidationOptions) {
			if c.SavingHorizon != 2*time.Hour || c.EvictionCost != 0.02 || c.WorkloadCooldown != 30*time.Minute {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "window without duration", args: []string{"--consolidation-windows=0 22 * * *"}, wantErr: "--consolidation-windows:"},
		{name: "window four fields", args: []string{"--consolidation-windows=0 22 * *=1h"}, wantErr: "want 5 fields"},
		{name: "window hour 24", args: []string{"--consolidation-windows=0 24 * * *=1h"}, wantErr: "hour field"},
		{name: "window zero duration", args: []string{"--consolidation-windows=0 22 * * *=0s"}, wantErr: "must be positive"},
		{name: "window bad step", args: []string{"--consolidation-windows=*/0 * * * *=1h"}, wantErr: "step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o.Consolidation)
		})
	}
}

func TestConsolidationWindowOpen(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, tc := range []struct {
		window string
		at     string
		open   bool
	}{
		{"0 22 * * *=8h", "2026-12-05T22:00:00Z", true},
		{"0 22 * * *=8h", "2026-12-06T05:59:00Z", true}, // across midnight
		{"0 22 * * *=8h", "2026-12-06T06:00:00Z", false},
		{"0 22 * * *=8h", "2026-12-05T21:59:59Z", false},
		{"0 22 * * *=8h", "2026-12-05T23:00:00+01:00", true}, // read in UTC: 22:00Z
		{"0 9 * * 1-5=8h", "2026-12-05T10:00:00Z", false},    // a Saturday
		{"0 9 * * 1-5=8h", "2026-12-07T10:00:00Z", true},     // a Monday
		{"0 0 1 * 0=1h", "2026-12-06T00:30:00Z", true},       // Sunday: either day field matches
		{"0 0 1 * 0=1h", "2026-12-01T00:30:00Z", true},       // the 1st
		{"0 0 1 * 0=1h", "2026-12-02T00:30:00Z", false},
		{"0 0 * * 7=1h", "2026-12-06T00:30:00Z", true}, // 7 is Sunday
		{"*/30 * * * *=10m", "2026-12-05T10:35:00Z", true},
		{"*/30 * * * *=10m", "2026-12-05T10:45:00Z", false},
	} {
		w, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatalf("%s: %v", tc.window, err)
		}
		if got := w.Open(at(tc.at)); got != tc.open {
			t.Errorf("%s at %s: open %v, want %v", tc.window, tc.at, got, tc.open)
		}
	}
	if !AnyOpen(nil, time.Now()) {
		t.Error("no windows must mean always open")
	}
}
