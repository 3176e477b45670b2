package resourcequotas

import "testing"

func TestClusterMaxNodes(t *testing.T) {
	cases := []struct {
		name          string
		groupMaxima   int
		maxNodesTotal int
		want          int
	}{
		{"no groups", 0, 0, 0},
		{"sum of maxima", 15, 0, 15},
		{"bounded by --max-nodes-total", 15, 12, 12},
		{"--max-nodes-total above the maxima", 15, 100, 15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := (Limits{MaxNodes: c.maxNodesTotal}).ClusterMaxNodes(c.groupMaxima); got != c.want {
				t.Fatalf("ClusterMaxNodes(%d) with MaxNodes %d = %d, want %d", c.groupMaxima, c.maxNodesTotal, got, c.want)
			}
		})
	}
}
