package digitalocean

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestParseConfigNodePoolSelection(t *testing.T) {
	cases := []struct {
		name, field string // field: the JSON text after "node_pool_selection":, "" = absent
		want        string
		wantErr     string
	}{
		{"absent", "", SelectByAutoScale, ""},
		{"empty", `""`, SelectByAutoScale, ""},
		{"auto_scale", `"auto_scale"`, SelectByAutoScale, ""},
		{"tags", `"tags"`, SelectByTags, ""},
		{"capitalised", `"Tags"`, "", `node_pool_selection "Tags" is not valid: want "auto_scale" (the default) or "tags"`},
		{"unknown", `"labels"`, "", `node_pool_selection "labels" is not valid`},
		{"padded", `" tags"`, "", `node_pool_selection " tags" is not valid`},
		{"wrong type", `true`, "", `field "node_pool_selection" must be a string, not a bool`},
		{"misspelt field", "", "", `unknown field "node_pool_selecton"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t"`
			if c.field != "" {
				in += `, "node_pool_selection": ` + c.field
			}
			if c.name == "misspelt field" {
				in += `, "node_pool_selecton": "tags"`
			}
			cfg, err := parseConfig([]byte(in + "}"))
			if endsWithError(t, err, c.wantErr) {
				return
			}
			if cfg.selection != c.want {
				t.Errorf("selection %q, want %q", cfg.selection, c.want)
			}
		})
	}
}

func TestTagBounds(t *testing.T) {
	const (
		minTag = "k8s-cluster-autoscaler-min:"
		maxTag = "k8s-cluster-autoscaler-max:"
	)
	cases := []struct {
		name     string
		tags     []string
		min, max int
		wantErr  string // substring; "" = valid
	}{
		{"plain", []string{minTag + "1", maxTag + "5"}, 1, 5, ""},
		{"scale to zero", []string{minTag + "0", maxTag + "3"}, 0, 3, ""},
		{"min equals max", []string{minTag + "4", maxTag + "4"}, 4, 4, ""},
		{"other tags around", []string{"k8s", "k8s-worker", maxTag + "10", "team:a", minTag + "2"}, 2, 10, ""},
		{"leading zero", []string{minTag + "01", maxTag + "010"}, 1, 10, ""},
		{"repeated, agreeing", []string{minTag + "1", minTag + "1", maxTag + "2"}, 1, 2, ""},
		{"no min", []string{maxTag + "5"}, 0, 0, "tag k8s-cluster-autoscaler-min:<n> is missing"},
		{"no max", []string{minTag + "1"}, 0, 0, "tag k8s-cluster-autoscaler-max:<n> is missing"},
		{"no tags", nil, 0, 0, "tag k8s-cluster-autoscaler-min:<n> is missing"},
		{"empty value", []string{minTag, maxTag + "5"}, 0, 0, `tag "k8s-cluster-autoscaler-min:": "" is not a non-negative whole number`},
		{"negative", []string{minTag + "-1", maxTag + "5"}, 0, 0, `tag "k8s-cluster-autoscaler-min:-1": "-1" is not a non-negative whole number`},
		{"plus sign", []string{minTag + "1", maxTag + "+5"}, 0, 0, `tag "k8s-cluster-autoscaler-max:+5"`},
		{"word", []string{minTag + "one", maxTag + "5"}, 0, 0, `"one" is not a non-negative whole number`},
		{"decimal", []string{minTag + "1", maxTag + "2.5"}, 0, 0, `"2.5" is not a non-negative whole number`},
		{"trailing colon part", []string{minTag + "1:2", maxTag + "5"}, 0, 0, `"1:2" is not a non-negative whole number`},
		{"overflow", []string{minTag + "1", maxTag + "99999999999999999999"}, 0, 0, "is not a non-negative whole number"},
		{"repeated, disagreeing", []string{minTag + "1", minTag + "2", maxTag + "5"}, 0, 0, `tags "k8s-cluster-autoscaler-min:1" and "k8s-cluster-autoscaler-min:2" disagree`},
		{"min above max", []string{minTag + "6", maxTag + "5"}, 0, 0, "min 6 (tag k8s-cluster-autoscaler-min:6) is greater than max 5 (tag k8s-cluster-autoscaler-max:5)"},
		// A separator other than the colon is not this tag at all.
		{"dash separator", []string{"k8s-cluster-autoscaler-min-1", maxTag + "5"}, 0, 0, "tag k8s-cluster-autoscaler-min:<n> is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			min, max, err := tagBounds(c.tags)
			if endsWithError(t, err, c.wantErr) {
				return
			}
			if min != c.min || max != c.max {
				t.Errorf("bounds %d..%d, want %d..%d", min, max, c.min, c.max)
			}
		})
	}
}

func TestSelectPool(t *testing.T) {
	enabled := []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:4"}
	cases := []struct {
		name      string
		mode      string
		autoScale bool
		minNodes  int
		maxNodes  int
		tags      []string
		group     bool
		min, max  int
		warn      bool
		note      string // substring of the note; "" = no note expected
	}{
		// auto_scale mode: the flag decides, tags are not read.
		{"auto_scale: on", SelectByAutoScale, true, 2, 9, nil, true, 2, 9, false, ""},
		{"auto_scale: on, scale to zero", SelectByAutoScale, true, 0, 3, nil, true, 0, 3, false, ""},
		{"auto_scale: off", SelectByAutoScale, false, 0, 0, nil, false, 0, 0, false, "has auto_scale off: not a node group"},
		{"auto_scale: off though tagged", SelectByAutoScale, false, 0, 0, enabled, false, 0, 0, false, "has auto_scale off"},
		{"auto_scale: on, tags ignored", SelectByAutoScale, true, 2, 9, enabled, true, 2, 9, false, ""},

		// tags mode.
		{"tags: tagged", SelectByTags, false, 0, 0, enabled, true, 1, 4, false, "is a node group by its tags: min 1, max 4"},
		{"tags: exact tag only", SelectByTags, false, 0, 0,
			[]string{"k8s-cluster-autoscaler-enabled:true", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:4"},
			false, 0, 0, true, "carries tags k8s-cluster-autoscaler-enabled:true,k8s-cluster-autoscaler-min:1,k8s-cluster-autoscaler-max:4 but not the tag k8s-cluster-autoscaler-enabled"},
		{"tags: untagged", SelectByTags, false, 0, 0, []string{"k8s", "k8s-worker"}, false, 0, 0, false, "has no tag k8s-cluster-autoscaler-enabled"},
		{"tags: missing max", SelectByTags, false, 0, 0, []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1"},
			false, 0, 0, true, "has tag k8s-cluster-autoscaler-enabled but tag k8s-cluster-autoscaler-max:<n> is missing: not a node group"},
		{"tags: malformed min", SelectByTags, false, 0, 0, []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:x", "k8s-cluster-autoscaler-max:3"},
			false, 0, 0, true, `tag "k8s-cluster-autoscaler-min:x": "x" is not a non-negative whole number`},
		{"tags: min above max", SelectByTags, false, 0, 0, []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:5", "k8s-cluster-autoscaler-max:3"},
			false, 0, 0, true, "min 5 (tag k8s-cluster-autoscaler-min:5) is greater than max 3"},
		{"tags: auto_scale on, tagged", SelectByTags, true, 1, 4, enabled, false, 0, 0, true,
			"has auto_scale on: DOKS's managed autoscaler owns it, so it is not a node group"},
		{"tags: auto_scale on, untagged", SelectByTags, true, 1, 4, nil, false, 0, 0, true,
			"has auto_scale on: DOKS's managed autoscaler owns it, so it is ignored with node_pool_selection=tags"},
		// DOKS's own min/max (0 with auto_scale off) are not used.
		{"tags: tag bounds win", SelectByTags, false, 7, 8, enabled, true, 1, 4, false, "min 1, max 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &godo.KubernetesNodePool{ID: "pool-id", Name: "workers", AutoScale: c.autoScale, MinNodes: c.minNodes, MaxNodes: c.maxNodes, Tags: c.tags}
			v := selectPool(c.mode, p)
			if v.group != c.group || v.minSize != c.min || v.maxSize != c.max || v.warn != c.warn {
				t.Errorf("verdict %+v, want group %v %d..%d warn %v", v, c.group, c.min, c.max, c.warn)
			}
			if c.note == "" {
				if v.note != "" {
					t.Errorf("note %q, want none", v.note)
				}
				return
			}
			if !strings.Contains(v.note, c.note) || !strings.Contains(v.note, "node pool workers (pool-id)") {
				t.Errorf("note %q, want one naming the pool and containing %q", v.note, c.note)
			}
		})
	}
}

// logCapture collects klog output, each line once.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count counts the lines of the given severity ('E', 'I') containing s,
// read with the quotes of structured values unescaped.
func (l *logCapture) count(severity byte, s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if len(line) > 0 && line[0] == severity && strings.Contains(strings.ReplaceAll(line, `\"`, `"`), s) {
			n++
		}
	}
	return n
}

func captureLogs(t *testing.T) *logCapture {
	l := &logCapture{}
	// Errors fall through to the INFO output too: discard the others so
	// each line is seen once.
	for _, s := range []string{"FATAL", "ERROR", "WARNING"} {
		klog.SetOutputBySeverity(s, io.Discard)
	}
	klog.SetOutputBySeverity("INFO", l)
	klog.LogToStderr(false)
	t.Cleanup(func() {
		klog.Flush()
		klog.LogToStderr(true)
	})
	return l
}

func groupIDs(e *testEnv) []string {
	var ids []string
	for _, g := range e.p.NodeGroups() {
		ids = append(ids, fmt.Sprintf("%s:%d..%d", g.(*NodeGroup).name, g.MinSize(), g.MaxSize()))
	}
	sort.Strings(ids)
	return ids
}

// The same cluster seen in both modes, through the simulator's list API.
func TestNodePoolSelectionModesAgainstSimulator(t *testing.T) {
	pools := []doks.PoolSpec{
		{Name: "managed", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5},
		{Name: "managed-tagged", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5,
			Tags: []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:0", "k8s-cluster-autoscaler-max:9"}},
		{Name: "self", Size: "s-2vcpu-4gb", Count: 2,
			Tags: []string{"k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:6"}},
		{Name: "self-zero", Size: "s-1vcpu-2gb", Count: 0,
			Tags: []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:0", "k8s-cluster-autoscaler-max:3"}},
		{Name: "bad-bounds", Size: "s-2vcpu-4gb", Count: 1,
			Tags: []string{"k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:4", "k8s-cluster-autoscaler-max:2"}},
		{Name: "fixed", Size: "s-1vcpu-2gb", Count: 1},
	}
	cases := []struct {
		mode      string
		want      []string
		templates int
	}{
		{"", []string{"managed-tagged:1..5", "managed:1..5"}, 2},
		{SelectByAutoScale, []string{"managed-tagged:1..5", "managed:1..5"}, 2},
		{SelectByTags, []string{"self-zero:0..3", "self:1..6"}, 2},
	}
	for _, c := range cases {
		t.Run("mode="+c.mode, func(t *testing.T) {
			e := newEnv(t, doks.Options{}, withSelection(c.mode))
			for _, s := range pools {
				e.pool(s)
			}
			e.refresh()
			if got := groupIDs(e); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("node groups %v, want %v", got, c.want)
			}
			if got := e.sim.RequestCount(doks.OpGetNodePoolTemplate); got != c.templates {
				t.Errorf("%d templates fetched, want %d (only for node groups)", got, c.templates)
			}
			for i := 0; i < 3; i++ {
				before := e.sim.TotalRequests()
				e.refresh()
				if got := e.sim.TotalRequests() - before; got != 1 {
					t.Errorf("steady-state Refresh: %d requests, want 1", got)
				}
			}
			// Every pool still counts for HasInstance, selected or not.
			for _, sp := range e.sim.Pools() {
				for _, n := range sp.Nodes {
					if has, err := e.p.HasInstance(kubeNode(n)); err != nil || !has {
						t.Errorf("HasInstance(%s of %s) = %v, %v", n.Name, sp.Name, has, err)
					}
				}
			}
		})
	}
}

// In tags mode a pool's tags are read at every Refresh: tagging, retagging
// and untagging through the API takes effect at the next one, at no extra
// request, and each warning is logged once per change.
func TestTagSelectionFollowsTagUpdates(t *testing.T) {
	logs := captureLogs(t)
	e := newEnv(t, doks.Options{BootDelay: -1}, withSelection(SelectByTags))
	p := e.pool(doks.PoolSpec{Name: "workers", Size: "s-2vcpu-4gb", Count: 1, Tags: []string{"k8s", "team:a"}})
	managed := e.pool(autoscaled("managed", 1, 1, 3))
	setTags := func(tags ...string) {
		t.Helper()
		if _, _, err := e.godoClient().Kubernetes.UpdateNodePool(context.Background(), testCluster, p.ID,
			&godo.KubernetesNodePoolUpdateRequest{Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	refreshes := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			before := e.sim.RequestCount(doks.OpListNodePools)
			e.refresh()
			if got := e.sim.RequestCount(doks.OpListNodePools) - before; got != 1 {
				t.Errorf("Refresh made %d list requests, want 1", got)
			}
		}
	}
	managedWarning := "node pool managed (" + managed.ID + ") has auto_scale on: DOKS's managed autoscaler owns it"

	refreshes(3)
	if got := groupIDs(e); len(got) != 0 {
		t.Fatalf("node groups %v before tagging, want none", got)
	}
	if n := logs.count('E', managedWarning); n != 1 {
		t.Errorf("managed-pool warning logged %d times in 3 Refreshes, want 1", n)
	}

	// Tagged with a malformed max: a warning naming pool and tag, once.
	setTags("k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:ten")
	refreshes(3)
	if got := groupIDs(e); len(got) != 0 {
		t.Errorf("node groups %v with a malformed max, want none", got)
	}
	malformed := `node pool workers (` + p.ID + `) has tag k8s-cluster-autoscaler-enabled but tag "k8s-cluster-autoscaler-max:ten"`
	if n := logs.count('E', malformed); n != 1 {
		t.Errorf("malformed-tag warning logged %d times in 3 Refreshes, want 1:\n%s", n, logs.buf.String())
	}

	// Fixed: the pool becomes a node group with the tags' bounds.
	setTags("k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:3")
	refreshes(2)
	if got := fmt.Sprint(groupIDs(e)); got != "[workers:1..3]" {
		t.Fatalf("node groups %s, want [workers:1..3]", got)
	}
	if n := logs.count('I', "node pool workers ("+p.ID+") is a node group by its tags: min 1, max 3"); n != 1 {
		t.Errorf("selection logged %d times, want 1", n)
	}

	// Resizing goes by the tag bounds and keeps the tags on the pool.
	g := e.group(p.ID)
	if err := g.IncreaseSize(3); err == nil || !strings.Contains(err.Error(), "max 3") {
		t.Errorf("IncreaseSize past the max tag: %v", err)
	}
	if err := g.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	sp := e.simPool(p.ID)
	if sp.Count != 3 || sp.AutoScale || !slices.Contains(sp.Tags, TagAutoscalerEnabled) || !slices.Contains(sp.Tags, "k8s-cluster-autoscaler-max:3") {
		t.Errorf("after IncreaseSize: count %d auto_scale %v tags %v", sp.Count, sp.AutoScale, sp.Tags)
	}
	refreshes(1)
	if got := fmt.Sprint(groupIDs(e)); got != "[workers:1..3]" {
		t.Errorf("node groups %s after a resize, want [workers:1..3]", got)
	}

	// The same malformed tags again after a good spell: warned again, once.
	setTags("k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:ten")
	refreshes(2)
	if n := logs.count('E', malformed); n != 2 {
		t.Errorf("malformed-tag warning logged %d times in all, want 2 (once per change)", n)
	}

	// Handing the pool to DOKS's managed autoscaler takes it away.
	setTags("k8s", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:3")
	on, minN, maxN := true, 1, 5
	if _, _, err := e.godoClient().Kubernetes.UpdateNodePool(context.Background(), testCluster, p.ID,
		&godo.KubernetesNodePoolUpdateRequest{AutoScale: &on, MinNodes: &minN, MaxNodes: &maxN}); err != nil {
		t.Fatal(err)
	}
	refreshes(2)
	if got := groupIDs(e); len(got) != 0 {
		t.Errorf("node groups %v after auto_scale was turned on, want none", got)
	}
	if n := logs.count('E', "node pool workers ("+p.ID+") carries tags k8s-cluster-autoscaler-enabled"); n != 1 {
		t.Errorf("conflict warning logged %d times, want 1", n)
	}
	if n := logs.count('E', managedWarning); n != 1 {
		t.Errorf("managed-pool warning logged %d times in all, want 1 (it never changed)", n)
	}
}

// A token without DigitalOcean's tag:read scope is answered with pools
// without tags. In tags mode no pool can then be a node group: the provider
// says why, naming the scope, in one error log line and in Problems (which
// the core shows in the status ConfigMap and an event) for as long as it
// lasts. Other modes, and tokens that can read tags, have no such problem.
func TestTagsModeNamesTheMissingTagReadScope(t *testing.T) {
	tagged := []string{"k8s", "k8s-worker", "k8s:" + testCluster, TagAutoscalerEnabled, TagPrefixMinNodes + "1", TagPrefixMaxNodes + "3"}
	for _, c := range []struct {
		name      string
		mode      string
		noTagRead bool
		want      bool
	}{
		{"tags mode, token without tag:read", SelectByTags, true, true},
		{"tags mode, token with tag:read", SelectByTags, false, false},
		{"auto_scale mode, token without tag:read", SelectByAutoScale, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := captureLogs(t)
			e := newEnv(t, doks.Options{}, withSelection(c.mode))
			if c.noTagRead {
				e.sim.SetTokenWithoutTagRead(testToken)
			}
			e.pool(doks.PoolSpec{Name: "tagged", Size: "s-2vcpu-4gb", Count: 1, Tags: tagged})
			e.pool(doks.PoolSpec{Name: "other", Size: "s-2vcpu-4gb", Count: 1, Tags: []string{"k8s", "k8s-worker"}})
			for i := 0; i < 3; i++ {
				e.refresh()
			}
			problems := e.p.Problems()
			got := len(problems) == 1 && strings.Contains(problems[0], "tag:read")
			if got != c.want || (!c.want && len(problems) > 0) {
				t.Fatalf("Problems() = %q, want a tag:read problem: %v", problems, c.want)
			}
			if n := logs.count('E', "tag:read"); c.want && n != 1 || !c.want && n != 0 {
				t.Errorf("tag:read error logged %d times in 3 Refreshes", n)
			}
		})
	}
}
