package statuscm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
)

// The status is written every loop, and sigs.k8s.io/yaml renders it by a
// round trip (JSON, then a YAML parse of the JSON, then YAML): 100 node
// groups took 8 MB and 16 ms a loop, as much as the rest of a steady
// loop's scale-down. render writes the same bytes directly: the keys in
// the order sigs.k8s.io/yaml sorts them, the same omissions, and every
// string as yaml.v2 (the library's own emitter) writes it at that place.
// They differ only where the library loses a string: it reads its own
// JSON back as YAML, so it fails on a non-printable character and reads
// NEL or U+2028 as a line break; here such strings are written escaped
// and read back as they were. TestStatusYAMLMatchesSigsYAML compares the
// two over random statuses.

// render writes status as sigs.k8s.io/yaml.Marshal does.
func render(status *api.ClusterAutoscalerStatus) string {
	e := emitter{buf: make([]byte, 0, 1024+1536*len(status.NodeGroups))}
	scalars.mu.Lock()
	defer scalars.mu.Unlock()
	e.scalars = &scalars

	e.str(0, "autoscalerStatus", string(status.AutoscalerStatus))
	e.open(0, "clusterWide")
	e.clusterHealth(2, &status.ClusterWide.Health)
	e.scaleDown(2, &status.ClusterWide.ScaleDown)
	e.open(2, "scaleUp")
	e.probed(4, status.ClusterWide.ScaleUp.LastProbeTime, status.ClusterWide.ScaleUp.LastTransitionTime)
	e.str(4, "status", string(status.ClusterWide.ScaleUp.Status))
	if c := status.Consolidation; c != nil {
		e.open(0, "consolidation")
		e.optional(2, "command", c.Command)
		e.optional(2, "lastResult", c.LastResult)
		e.str(2, "savingsPerHour", c.SavingsPerHour)
		e.optional(2, "since", c.Since)
		e.str(2, "status", c.Status)
	}
	if l := status.Limits; l != nil {
		e.limits(l)
	}
	if status.Message != "" {
		e.str(0, "message", status.Message)
	}
	if len(status.NodeGroups) > 0 {
		e.open(0, "nodeGroups")
		for i := range status.NodeGroups {
			e.nodeGroup(&status.NodeGroups[i])
		}
	}
	e.str(0, "time", status.Time)
	scalars.turn()
	return string(e.buf)
}

func (e *emitter) nodeGroup(g *api.NodeGroupStatus) {
	e.item = true
	if g.Autoprovisioned {
		e.raw(2, "autoprovisioned", "true")
	}
	h := &g.Health
	e.open(2, "health")
	e.int(4, "cloudProviderTarget", h.CloudProviderTarget)
	e.time(4, "lastProbeTime", h.LastProbeTime)
	e.time(4, "lastTransitionTime", h.LastTransitionTime)
	e.int(4, "maxSize", h.MaxSize)
	e.int(4, "minSize", h.MinSize)
	e.nodeCounts(4, &h.NodeCounts)
	e.str(4, "status", string(h.Status))
	e.str(2, "name", g.Name)
	e.scaleDown(2, &g.ScaleDown)
	u := &g.ScaleUp
	e.open(2, "scaleUp")
	if u.BackoffInfo == (api.BackoffInfo{}) {
		e.raw(4, "backoffInfo", "{}")
	} else {
		e.open(4, "backoffInfo")
		if u.BackoffInfo.ErrorCode != "" {
			e.str(6, "errorCode", u.BackoffInfo.ErrorCode)
		}
		if u.BackoffInfo.ErrorMessage != "" {
			e.str(6, "errorMessage", u.BackoffInfo.ErrorMessage)
		}
	}
	e.probed(4, u.LastProbeTime, u.LastTransitionTime)
	e.str(4, "status", string(u.Status))
}

func (e *emitter) limits(l *api.LimitsStatus) {
	if l.DropletQuota == nil && l.HourlyCost == "" && l.MaxHourlyCost == "" && len(l.Unpriced) == 0 {
		e.raw(0, "limits", "{}")
		return
	}
	e.open(0, "limits")
	if q := l.DropletQuota; q != nil {
		e.open(2, "dropletQuota")
		e.int(4, "droplets", q.Droplets)
		e.optional(4, "lastTransitionTime", q.LastTransitionTime)
		e.int(4, "limit", q.Limit)
		e.optional(4, "readAt", q.ReadAt)
		e.str(4, "status", q.Status)
	}
	e.optional(2, "hourlyCost", l.HourlyCost)
	e.optional(2, "maxHourlyCost", l.MaxHourlyCost)
	if len(l.Unpriced) > 0 {
		e.open(2, "unpriced")
		for _, name := range l.Unpriced {
			e.buf = append(e.buf, spaces[:2]...)
			e.buf = append(e.buf, '-')
			e.buf = append(e.buf, e.scalars.get(2, "-", validUTF8(name))...)
		}
	}
}

func (e *emitter) clusterHealth(col int, h *api.ClusterHealthCondition) {
	e.open(col, "health")
	e.probed(col+2, h.LastProbeTime, h.LastTransitionTime)
	e.nodeCounts(col+2, &h.NodeCounts)
	e.str(col+2, "status", string(h.Status))
}

func (e *emitter) scaleDown(col int, s *api.ScaleDownCondition) {
	e.open(col, "scaleDown")
	if s.Candidates != 0 {
		e.int(col+2, "candidates", s.Candidates)
	}
	e.probed(col+2, s.LastProbeTime, s.LastTransitionTime)
	e.str(col+2, "status", string(s.Status))
}

func (e *emitter) nodeCounts(col int, c *api.NodeCount) {
	e.open(col, "nodeCounts")
	e.int(col+2, "longUnregistered", c.LongUnregistered)
	r := &c.Registered
	e.open(col+2, "registered")
	in := col + 4
	if r.BeingDeleted != 0 {
		e.int(in, "beingDeleted", r.BeingDeleted)
	}
	e.int(in, "notStarted", r.NotStarted)
	e.int(in, "ready", r.Ready)
	e.int(in, "suspended", r.Suspended)
	e.int(in, "total", r.Total)
	e.open(in, "unready")
	e.int(in+2, "resourceUnready", r.Unready.ResourceUnready)
	e.int(in+2, "total", r.Unready.Total)
	e.int(col+2, "unregistered", c.Unregistered)
}

func (e *emitter) probed(col int, probe, transition metav1.Time) {
	e.time(col, "lastProbeTime", probe)
	e.time(col, "lastTransitionTime", transition)
}

// emitter appends block-style YAML, two spaces an indentation level, a
// sequence's items at their key's indentation (as yaml.v2 writes them).
type emitter struct {
	buf []byte
	// item: the next key opens a sequence item ("- " in its indentation).
	item    bool
	scalars *scalarMemo
}

func (e *emitter) key(col int, k string) {
	if e.item {
		e.item = false
		e.buf = append(e.buf, spaces[:col-2]...)
		e.buf = append(e.buf, "- "...)
	} else {
		e.buf = append(e.buf, spaces[:col]...)
	}
	e.buf = append(e.buf, k...)
	e.buf = append(e.buf, ':')
}

const spaces = "                "

// open starts a mapping under k.
func (e *emitter) open(col int, k string) {
	e.key(col, k)
	e.buf = append(e.buf, '\n')
}

func (e *emitter) raw(col int, k, v string) {
	e.key(col, k)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, v...)
	e.buf = append(e.buf, '\n')
}

func (e *emitter) int(col int, k string, v int) {
	e.key(col, k)
	e.buf = append(e.buf, ' ')
	e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	e.buf = append(e.buf, '\n')
}

// optional writes s unless it is empty (omitempty).
func (e *emitter) optional(col int, k, s string) {
	if s != "" {
		e.str(col, k, s)
	}
}

// time writes a metav1.Time as its JSON form does: RFC 3339 in UTC, null
// when zero.
func (e *emitter) time(col int, k string, t metav1.Time) {
	if t.IsZero() {
		e.raw(col, k, "null")
		return
	}
	e.str(col, k, t.UTC().Format(time.RFC3339))
}

// str writes a string as yaml.v2 writes it after key k at column col:
// plain, quoted, or a literal block. The choice, and where a long line
// folds, depend on the string, the key and the column, so the memo is
// keyed by all three.
func (e *emitter) str(col int, k, s string) {
	e.key(col, k)
	e.buf = append(e.buf, e.scalars.get(col, k, validUTF8(s))...)
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json does
// before sigs.k8s.io/yaml sees the string.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

type scalarKey struct {
	col      int
	key, val string
}

// scalarMemo is how yaml.v2 wrote each string of the last renders. It
// holds two generations: the strings of the render before this one and
// those of this one; turn drops the older. A steady status (the same
// names, states and messages, one new probe time) costs map lookups.
type scalarMemo struct {
	mu        sync.Mutex
	last, cur map[scalarKey]string
}

var scalars scalarMemo

func (m *scalarMemo) get(col int, k, s string) string {
	key := scalarKey{col, k, s}
	if v, ok := m.cur[key]; ok {
		return v
	}
	v, ok := m.last[key]
	if !ok {
		v = yamlScalar(col, k, s)
	}
	if m.cur == nil {
		m.cur = map[scalarKey]string{}
	}
	m.cur[key] = v
	return v
}

func (m *scalarMemo) turn() {
	m.last, m.cur = m.cur, nil
}

// yamlScalar is what yaml.v2 writes after "k:" for s when k is at column
// col: s under k, nested col/2 mappings deep, and the lines before it
// and k cut off. k "-" is an item of a sequence of strings at col: what
// yaml.v2 writes after its "-".
func yamlScalar(col int, k, s string) string {
	var doc any = yamlv2.MapSlice{{Key: k, Value: s}}
	lines := col / 2
	if k == "-" {
		doc = yamlv2.MapSlice{{Key: "k", Value: []string{s}}}
		lines++
	}
	for i := 0; i < col/2; i++ {
		doc = yamlv2.MapSlice{{Key: "k", Value: doc}}
	}
	out, err := yamlv2.Marshal(doc)
	if err != nil {
		// yaml.v2 marshals every valid UTF-8 string; were it not to,
		// the string's JSON form is a double-quoted YAML scalar.
		q, _ := json.Marshal(s)
		return " " + string(q) + "\n"
	}
	for i := 0; i < lines; i++ {
		out = out[bytes.IndexByte(out, '\n')+1:]
	}
	prefix := spaces[:col] + k + ":"
	if k == "-" {
		prefix = spaces[:col] + "-"
	}
	return string(bytes.TrimPrefix(out, []byte(prefix)))
}
