package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// timeline is each removed node's way out during the empty-node scale-down, in
// seconds from the autoscaler's start: when the harness first saw its ToBeDeleted
// taint and its DigitalOcean node deleting (both polled every 100 ms), and when the
// autoscaler's wait after tainting it ended (from its log: the wait's start plus its
// length). The nodes of one wait are one batch.
type timeline struct {
	start time.Time

	mu     sync.Mutex
	taint  map[string]time.Time
	delete map[string]time.Time
	// waitEnd and batch come from the log once the run is over.
	waitEnd map[string]time.Time
	batch   map[string]int
}

func newTimeline(start time.Time) *timeline {
	return &timeline{start: start, taint: map[string]time.Time{}, delete: map[string]time.Time{}, waitEnd: map[string]time.Time{}, batch: map[string]int{}}
}

func (tl *timeline) tainted(node string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.taint[node]; !ok {
		tl.taint[node] = at
	}
}

func (tl *timeline) deleting(node string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.delete[node]; !ok {
		tl.delete[node] = at
	}
}

// waitLine is the autoscaler's log line as a wait after tainting starts, with
// klog's header (month, day, time of day).
var waitLine = regexp.MustCompile(`^I(\d{4}) (\d{2}:\d{2}:\d{2}\.\d{6}) .*Scale-down: waiting after tainting.* delay="([^"]+)" nodes="([^"]*)"`)

// readWaits reads the waits after tainting from the autoscaler's log (this
// project's binary's wording; another binary's log leaves the column empty).
func (tl *timeline) readWaits(logPath string) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	batch := 0
	for sc.Scan() {
		m := waitLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		// klog's time of day is local and has no year: placed on the day of
		// the run's start in its zone.
		at, err := time.ParseInLocation("0102 15:04:05.000000", m[1]+" "+m[2], time.Local)
		if err != nil {
			return fmt.Errorf("%s: %w", logPath, err)
		}
		s := tl.start
		at = time.Date(s.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.Local)
		d, err := time.ParseDuration(m[3])
		if err != nil {
			return fmt.Errorf("%s: %w", logPath, err)
		}
		batch++
		tl.mu.Lock()
		for _, n := range strings.Split(m[4], ", ") {
			tl.waitEnd[n] = at.Add(d)
			tl.batch[n] = batch
		}
		tl.mu.Unlock()
	}
	return sc.Err()
}

// print writes a line a node, in the order their taints were seen, then a line a
// batch: its taints, the end of its wait, its deletions, and the next batch's first
// taint with the gap from this batch's last deletion to it.
func (tl *timeline) print(out io.Writer) error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var nodes []string
	for n := range tl.taint {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b string) int {
		if c := tl.taint[a].Compare(tl.taint[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	sec := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1f", t.Sub(tl.start).Seconds())
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nper node (s from the autoscaler's start)\tbatch\ttaint seen\tdelay after taint ends\tDO node deleting\n")
	for _, n := range nodes {
		b := "-"
		if i, ok := tl.batch[n]; ok {
			b = fmt.Sprint(i)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n, b, sec(tl.taint[n]), sec(tl.waitEnd[n]), sec(tl.delete[n]))
	}
	type span struct{ firstTaint, lastTaint, waitEnd, firstDelete, lastDelete time.Time }
	batches := map[int]*span{}
	last := 0
	for _, n := range nodes {
		i, ok := tl.batch[n]
		if !ok {
			continue
		}
		last = max(last, i)
		s := batches[i]
		if s == nil {
			s = &span{}
			batches[i] = s
		}
		minT := func(a *time.Time, t time.Time) {
			if !t.IsZero() && (a.IsZero() || t.Before(*a)) {
				*a = t
			}
		}
		maxT := func(a *time.Time, t time.Time) {
			if t.After(*a) {
				*a = t
			}
		}
		minT(&s.firstTaint, tl.taint[n])
		maxT(&s.lastTaint, tl.taint[n])
		maxT(&s.waitEnd, tl.waitEnd[n])
		minT(&s.firstDelete, tl.delete[n])
		maxT(&s.lastDelete, tl.delete[n])
	}
	fmt.Fprintf(w, "\nper batch (s)\tfirst taint\tlast taint\tdelay ends\tfirst deleting\tlast deleting\tnext batch's first taint\tgap: last deleting → next taint\n")
	for i := 1; i <= last; i++ {
		s := batches[i]
		if s == nil {
			continue
		}
		next, gap := "-", "-"
		if n := batches[i+1]; n != nil {
			next = sec(n.firstTaint)
			if !s.lastDelete.IsZero() {
				gap = fmt.Sprintf("%.1f", n.firstTaint.Sub(s.lastDelete).Seconds())
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i, sec(s.firstTaint), sec(s.lastTaint), sec(s.waitEnd), sec(s.firstDelete), sec(s.lastDelete), next, gap)
	}
	return w.Flush()
}
