package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// rows are the figures of one run, in the order they were added: a figure's name and
// its value.
type rows struct {
	names  []string
	values map[string]string
}

func (r *rows) add(name, format string, args ...any) {
	if r.values == nil {
		r.values = map[string]string{}
	}
	if _, ok := r.values[name]; !ok {
		r.names = append(r.names, name)
	}
	r.values[name] = fmt.Sprintf(format, args...)
}

// printTable writes one table with a column per run (headers[i] over runs[i]): every
// figure any run has, in the first run's order, then the figures only later runs have.
// A figure a run lacks shows "—".
func printTable(out io.Writer, title string, headers []string, runs []*rows) error {
	var names []string
	seen := map[string]bool{}
	for _, r := range runs {
		for _, n := range r.names {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n%s\t%s\n", title, strings.Join(headers, "\t"))
	for _, n := range names {
		vals := make([]string, len(runs))
		for i, r := range runs {
			v, ok := r.values[n]
			if !ok {
				v = "—"
			}
			vals[i] = v
		}
		fmt.Fprintf(w, "%s\t%s\n", n, strings.Join(vals, "\t"))
	}
	return w.Flush()
}
