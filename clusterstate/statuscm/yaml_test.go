package statuscm

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
)

// StatusYAML writes what sigs.k8s.io/yaml.Marshal writes (upstream renders
// its status with it, and users' tools read that), over random statuses
// whose strings hold what YAML treats specially: indicators, words that
// resolve to booleans, numbers or timestamps, leading and trailing spaces,
// line breaks, lines longer than yaml.v2's 80 columns, other scripts and
// invalid UTF-8. Where the library fails (it cannot read back its own JSON
// when a string holds a non-printable character), ours must still render
// a document that reads back as the status.
func TestStatusYAMLMatchesSigsYAML(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const cases = 2000
	refused, lossy := 0, 0
	for i := 0; i < cases; i++ {
		st := randomStatus(rng)
		want, refErr := yaml.Marshal(st)
		// Twice: the second render reads the strings of the first from
		// the memo.
		for pass := 0; pass < 2; pass++ {
			got := StatusYAML(st)
			if refErr == nil && got == string(want) {
				continue
			}
			if !readsBackAs(t, got, st) {
				t.Fatalf("case %d, render %d: differs from sigs.k8s.io/yaml (%v) and does not read back as the status\ngot:\n%s\nwant:\n%s", i, pass+1, refErr, got, want)
			}
			switch {
			case refErr != nil:
				refused++
			case readsBackAs(t, string(want), st):
				t.Fatalf("case %d, render %d: differs from sigs.k8s.io/yaml, which reads back as the status\ngot:\n%s\nwant:\n%s", i, pass+1, got, want)
			default:
				lossy++
			}
		}
	}
	t.Logf("%d random statuses: sigs.k8s.io/yaml refused %d and changed %d of them; ours reads back as each", cases, refused/2, lossy/2)
	if same := cases - (refused+lossy)/2; same < cases*3/4 {
		t.Errorf("only %d of %d statuses compared byte for byte", same, cases)
	}
}

// readsBackAs tells whether doc reads back as st, compared as JSON values
// (encoding/json writes an invalid byte as \ufffd and U+FFFD as is).
func readsBackAs(t *testing.T, doc string, st *api.ClusterAutoscalerStatus) bool {
	var back api.ClusterAutoscalerStatus
	if err := yaml.Unmarshal([]byte(doc), &back); err != nil {
		return false
	}
	return reflect.DeepEqual(jsonValue(t, st), jsonValue(t, &back))
}

var pieces = []string{
	"", "a", "Healthy", "pool-uuid-1", "8c5f0d1e-4b2a-4c3e-9f7a-000000000001", "0e5f0d1e-4b2a",
	"yes", "No", "ON", "y", "null", "~", "true", "False", ".inf", "-.Inf", ".NaN",
	"123", "-7", "1e3", "0x1F", "0o17", "0b101", "1_000", "1:20", "3.", "+1",
	"2026-01-02", "2026-01-02 03:04:05", "2026-01-02T03:04:05Z",
	"-", "- a", "a: b", "a:b", "a #b", "#c", " lead", "trail ", "  ", "?", ":", ",",
	"{x}", "[y]", "&anchor", "*alias", "!tag", "%dir", "@at", "`tick", "|pipe", ">gt", "'q'", "\"dq\"", "\\",
	"multi\nline", "ends\n", "\n", "tab\tx", "ünïcode", "日本語", "\xff", "\xe2\x82",
	"no-code-digitalocean", "POST https://api.digitalocean.com/v2/kubernetes/clusters: 422 (request \"abc\") droplet limit exceeded",
	strings.Repeat("word ", 30), strings.Repeat("x", 90),
}

// controls are characters the YAML reader refuses or reads as others
// (NEL as a line break), which sigs.k8s.io/yaml meets in its own JSON.
var controls = []string{"\x7f", "\u0085", "\ufeff", "\u2028", "\x00", "cr\rx", "\x1b[0m"}

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(4); n > 0; n-- {
		if rng.Intn(40) == 0 {
			b.WriteString(controls[rng.Intn(len(controls))])
			continue
		}
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

func randomTime(rng *rand.Rand) metav1.Time {
	switch rng.Intn(4) {
	case 0:
		return metav1.Time{}
	case 1:
		return probe
	default:
		zone := time.FixedZone("Z", (rng.Intn(27)-12)*3600)
		return metav1.NewTime(time.Unix(rng.Int63n(4e9), rng.Int63n(1e9)).In(zone))
	}
}

func randomInt(rng *rand.Rand) int {
	if rng.Intn(3) == 0 {
		return 0
	}
	return rng.Intn(2000) - 10
}

func randomCounts(rng *rand.Rand) api.NodeCount {
	return api.NodeCount{
		Registered: api.RegisteredNodeCount{Total: randomInt(rng), Ready: randomInt(rng), NotStarted: randomInt(rng),
			Suspended: randomInt(rng), BeingDeleted: randomInt(rng),
			Unready: api.RegisteredUnreadyNodeCount{Total: randomInt(rng), ResourceUnready: randomInt(rng)}},
		LongUnregistered: randomInt(rng), Unregistered: randomInt(rng),
	}
}

func randomScaleDown(rng *rand.Rand) api.ScaleDownCondition {
	return api.ScaleDownCondition{Status: api.ScaleDownConditionStatus(randomString(rng)), Candidates: randomInt(rng),
		LastProbeTime: randomTime(rng), LastTransitionTime: randomTime(rng)}
}

func randomStatus(rng *rand.Rand) *api.ClusterAutoscalerStatus {
	s := &api.ClusterAutoscalerStatus{
		Time:             randomString(rng),
		AutoscalerStatus: api.ClusterAutoscalerStatusValue(randomString(rng)),
		Message:          randomString(rng),
		ClusterWide: api.ClusterWideStatus{
			Health: api.ClusterHealthCondition{Status: api.ClusterHealthConditionStatus(randomString(rng)), NodeCounts: randomCounts(rng),
				LastProbeTime: randomTime(rng), LastTransitionTime: randomTime(rng)},
			ScaleUp: api.ClusterScaleUpCondition{Status: api.ClusterScaleUpConditionStatus(randomString(rng)),
				LastProbeTime: randomTime(rng), LastTransitionTime: randomTime(rng)},
			ScaleDown: randomScaleDown(rng),
		},
	}
	for n := rng.Intn(4); n > 0; n-- {
		g := api.NodeGroupStatus{
			Name: randomString(rng),
			Health: api.NodeGroupHealthCondition{Status: api.NodeGroupHealthConditionStatus(randomString(rng)), NodeCounts: randomCounts(rng),
				CloudProviderTarget: randomInt(rng), MinSize: randomInt(rng), MaxSize: randomInt(rng),
				LastProbeTime: randomTime(rng), LastTransitionTime: randomTime(rng)},
			ScaleUp: api.NodeGroupScaleUpCondition{Status: api.NodeGroupScaleUpConditionStatus(randomString(rng)),
				LastProbeTime: randomTime(rng), LastTransitionTime: randomTime(rng)},
			ScaleDown:       randomScaleDown(rng),
			Autoprovisioned: rng.Intn(2) == 0,
		}
		if rng.Intn(2) == 0 {
			g.ScaleUp.BackoffInfo = api.BackoffInfo{ErrorCode: randomString(rng), ErrorMessage: randomString(rng)}
		}
		s.NodeGroups = append(s.NodeGroups, g)
	}
	if rng.Intn(3) == 0 {
		s.Consolidation = &api.ConsolidationStatus{Status: randomString(rng), Command: randomString(rng), Since: randomString(rng),
			LastResult: randomString(rng), SavingsPerHour: randomString(rng)}
	}
	if rng.Intn(3) == 0 {
		s.Limits = &api.LimitsStatus{HourlyCost: randomString(rng), MaxHourlyCost: randomString(rng)}
		for n := rng.Intn(3); n > 0; n-- {
			s.Limits.Unpriced = append(s.Limits.Unpriced, randomString(rng))
		}
		if rng.Intn(2) == 0 {
			s.Limits.DropletQuota = &api.DropletQuotaStatus{Status: randomString(rng), Limit: randomInt(rng), Droplets: randomInt(rng),
				ReadAt: randomString(rng), LastTransitionTime: randomString(rng)}
		}
	}
	return s
}

func jsonValue(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
