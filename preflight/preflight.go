// Package preflight checks, before (or beside) an install, that the
// autoscaler can work with its cloud config and Kubernetes identity: the
// DigitalOcean token, its scopes as the answers show them, the cluster, which
// pools are node groups and why, the sizes allowed for pools on demand, the
// RBAC rights deploy/ grants, the CRDs and API groups enabled features need,
// and the Lease namespace. It only reads: the one kind of object it creates
// is SelfSubjectAccessReview, which asks a question and stores nothing.
//
// It runs as `cluster-autoscaler preflight` (same flags as the autoscaler,
// plus -o json) and as the chart's `helm test` hook; docs/preflight.md.
package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Verdict is a check's outcome. Only Fail blocks (a non-zero exit).
type Verdict string

const (
	OK   Verdict = "ok"
	Warn Verdict = "warn"
	Fail Verdict = "FAIL"
)

// Result is one check's line. The JSON form ({check, verdict, detail, fix},
// every key always present) is the stable schema of `-o json`.
type Result struct {
	// Check names what was checked: a stable identifier such as do-token,
	// do-pool/<name>, kube-rbac/<resource>.
	Check   string  `json:"check"`
	Verdict Verdict `json:"verdict"`
	// Detail says what was found; Fix what to do ("" when nothing).
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Report is every check's result, in the order they ran.
type Report []Result

// Blocking reports whether a result failed.
func (r Report) Blocking() bool {
	for _, x := range r {
		if x.Verdict == Fail {
			return true
		}
	}
	return false
}

// Count returns how many results have verdict v.
func (r Report) Count(v Verdict) int {
	n := 0
	for _, x := range r {
		if x.Verdict == v {
			n++
		}
	}
	return n
}

// Find returns the first result whose check is name, or nil.
func (r Report) Find(name string) *Result {
	for i := range r {
		if r[i].Check == name {
			return &r[i]
		}
	}
	return nil
}

// ExitCode is 0 when nothing blocks, 1 otherwise.
func (r Report) ExitCode() int {
	if r.Blocking() {
		return 1
	}
	return 0
}

// WriteText prints one line per check: verdict, check, detail and the fix,
// then a summary line.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, x := range r {
		fmt.Fprintf(&b, "%-4s %s: %s", x.Verdict, x.Check, oneLine(x.Detail))
		if x.Fix != "" {
			fmt.Fprintf(&b, " | fix: %s", oneLine(x.Fix))
		}
		b.WriteByte('\n')
	}
	state := "nothing blocks"
	if r.Blocking() {
		state = "blocking problems: the autoscaler would not work as configured"
	}
	fmt.Fprintf(&b, "preflight: %d ok, %d warn, %d FAIL: %s\n", r.Count(OK), r.Count(Warn), r.Count(Fail), state)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the results as a JSON array of {check, verdict, detail, fix}.
func (r Report) WriteJSON(w io.Writer) error {
	if r == nil {
		r = Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// oneLine keeps a result on one line whatever an error text holds.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Options are what a run checks with.
type Options struct {
	// Autoscaling are the autoscaler's flags: --cloud-config, --kubeconfig,
	// --namespace and the feature flags say what is needed.
	Autoscaling config.AutoscalingOptions
	// Kube, when set, is used instead of a client built from the flags
	// (tests); KubeHost names it in messages.
	Kube     kubernetes.Interface
	KubeHost string
	// Timeout bounds the whole run; DefaultTimeout when 0.
	Timeout time.Duration
}

// DefaultTimeout bounds a run: every call it makes answers in well under a
// second on a healthy cluster; an unreachable server is told after this.
const DefaultTimeout = 30 * time.Second

// Run runs every check and returns their results, the DigitalOcean side's
// first. The two sides are independent: a failure of one does not hide the
// other's results.
func Run(ctx context.Context, o Options) Report {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Side by side: a slow side (an API that does not answer) does not
	// spend the other's time.
	kube := make(chan Report, 1)
	go func() { kube <- checkKubernetes(ctx, o) }()
	r := checkDigitalOcean(ctx, o.Autoscaling)
	return append(r, <-kube...)
}
