package eventreasons

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the module's root, whose code the test reads.
const root = "../.."

// eventCall finds the reason of a recorder.Event/Eventf call.
var eventCall = regexp.MustCompile(`\.Eventf?\([^,]+,\s*apiv1\.EventType\w+,\s*"(\w+)"`)

// recordedReasons lists the event reasons the autoscaler's own code records
// (the sandbox, tests and tools excluded).
func recordedReasons(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() && (rel == "sandbox" || rel == "test" || rel == "hack" || rel == "cmd" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range eventCall.FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = append(out[m[1]], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every event reason upstream records that applies on DigitalOcean is
// recorded, and every reason recorded is upstream's or listed as this
// project's own (testdata/upstream-1.36.1-events.tsv says on which object and
// with which message).
func TestEventReasonsAsUpstream(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "testdata/upstream-1.36.1-events.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	var missing []string
	recorded := recordedReasons(t)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if strings.HasPrefix(cols[0], "#") || cols[0] == "reason" {
			continue
		}
		reason, object, status := cols[0], cols[1], cols[4]
		listed[reason] = true
		switch status {
		case "emitted", "own":
			if len(recorded[reason]) == 0 {
				t.Errorf("%s (on a %s) is listed as %s but nothing records it", reason, object, status)
			}
		case "missing":
			missing = append(missing, reason+" on a "+object)
		case "n/a":
			if len(recorded[reason]) > 0 {
				t.Errorf("%s is listed as not applicable but %v record it", reason, recorded[reason])
			}
		default:
			t.Errorf("%s: unknown status %q", reason, status)
		}
	}
	var reasons []string
	for r, paths := range recorded {
		reasons = append(reasons, r)
		if !listed[r] {
			t.Errorf("%s (recorded in %v) is neither upstream's nor listed as this project's own", r, paths)
		}
	}
	sort.Strings(reasons)
	t.Logf("recorded: %v; upstream's, not recorded yet: %v", reasons, missing)
}
