package deletiontracker

import (
	"reflect"
	"testing"
)

func TestTrackerReportsStartsAndEnds(t *testing.T) {
	type end struct {
		node, group string
		outcome     Outcome
	}
	var ends []end
	tr := New(func(node, group string, o Outcome) { ends = append(ends, end{node, group, o}) })
	tr.Started("n1", "g1", false)
	tr.Started("n2", "g1", true)
	tr.Started("n3", "g2", true)

	if r, d := tr.InFlight(); r != 3 || d != 2 {
		t.Fatalf("InFlight = %d, %d; want 3 removals, 2 drains", r, d)
	}
	if got := tr.DeletingInGroup("g1"); got != 2 {
		t.Fatalf("DeletingInGroup(g1) = %d, want 2", got)
	}
	if got := tr.Draining(); !reflect.DeepEqual(got, map[string]bool{"n2": true, "n3": true}) {
		t.Fatalf("Draining = %v", got)
	}

	tr.Ended("n1", Deleted)
	tr.Ended("n2", Failed)
	if got := tr.BeingDeleted(); !reflect.DeepEqual(got, map[string]bool{"n3": true}) {
		t.Fatalf("BeingDeleted after two ends = %v, want n3 only", got)
	}
	if r, d := tr.InFlight(); r != 1 || d != 1 {
		t.Fatalf("InFlight = %d, %d; want 1, 1", r, d)
	}
	want := []end{{"n1", "g1", Deleted}, {"n2", "g1", Failed}}
	if !reflect.DeepEqual(ends, want) {
		t.Fatalf("listener heard %v, want %v", ends, want)
	}
}
