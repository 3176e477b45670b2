package report

import (
	"errors"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/core/groupdeletion"
)

func TestNodeGroupDeleted(t *testing.T) {
	cases := []struct {
		name         string
		d            groupdeletion.Outcome
		want         string
		deleted, err float64
	}{
		{"deleted", groupdeletion.Outcome{GroupID: "pool-1"}, "Normal DeletedNodeGroup Deleted empty node group pool-1", 1, 0},
		{"refused", groupdeletion.Outcome{GroupID: "pool-1", Err: errors.New("412 not empty"), NextAttempt: t0.Add(time.Minute)},
			"Warning FailedToDeleteNodeGroup Deleting empty node group pool-1 failed (next attempt after 2026-01-02T03:01:00Z): 412 not empty", 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			deletedBefore, _ := f.value(t, "deleted_node_groups_total", nil)
			errBefore, _ := f.value(t, "errors_total", map[string]string{"type": "cloudProviderError"})
			f.r.NodeGroupDeleted(c.d)
			wantEvents(t, f.drain(), c.want)
			if v, _ := f.value(t, "deleted_node_groups_total", nil); v != deletedBefore+c.deleted {
				t.Errorf("deleted_node_groups_total rose by %v, want %v", v-deletedBefore, c.deleted)
			}
			if v, _ := f.value(t, "errors_total", map[string]string{"type": "cloudProviderError"}); v != errBefore+c.err {
				t.Errorf("errors_total{cloudProviderError} rose by %v, want %v", v-errBefore, c.err)
			}
		})
	}
}
