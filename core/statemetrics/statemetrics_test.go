package statemetrics

import "testing"

func TestMaxNodes(t *testing.T) {
	cases := []struct {
		name  string
		max   []int
		total int
		want  int
	}{
		{"no groups", nil, 0, 0},
		{"sum of maxima", []int{10, 5}, 0, 15},
		{"bounded by --max-nodes-total", []int{10, 5}, 12, 12},
		{"--max-nodes-total above the maxima", []int{10, 5}, 100, 15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := maxNodes(c.max, c.total); got != c.want {
				t.Fatalf("maxNodes(%v, %d) = %d, want %d", c.max, c.total, got, c.want)
			}
		})
	}
}
