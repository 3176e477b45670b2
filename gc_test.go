package main

import (
	"runtime/debug"
	"testing"
)

// The collector's target: 50 unless the environment sets GOGC, whose value
// the runtime applied at start and the autoscaler leaves alone.
func TestSetGCPercent(t *testing.T) {
	const before = 123 // stands for what the runtime took from GOGC
	for _, tc := range []struct {
		name, env   string
		want        gcPercent
		wantPercent int
	}{
		{"unset", "", gcPercent{"50", "default"}, 50},
		{"GOGC=100", "100", gcPercent{"100", "GOGC"}, before},
		{"GOGC=off", "off", gcPercent{"off", "GOGC"}, before},
		{"GOGC=25", "25", gcPercent{"25", "GOGC"}, before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := debug.SetGCPercent(before)
			defer debug.SetGCPercent(prev)
			got := setGCPercent(func(k string) string {
				if k == "GOGC" {
					return tc.env
				}
				return ""
			})
			if got != tc.want {
				t.Errorf("setGCPercent = %+v, want %+v", got, tc.want)
			}
			if p := debug.SetGCPercent(before); p != tc.wantPercent {
				t.Errorf("the collector's target is %d, want %d", p, tc.wantPercent)
			}
		})
	}
}
