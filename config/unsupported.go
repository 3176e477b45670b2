package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// defaultOnlyFlags are upstream flags this build defines but implements only
// at upstream's default value: the default is accepted (the build behaves
// so), any other value is refused with the reason given here. Implementing a
// flag means deleting its line.
var defaultOnlyFlags = map[string]string{
	"scale-down-delay-type-local":                        "scale-down delays are cluster-wide in this build",
	"max-node-startup-time":                              "registered nodes are judged by readiness and --scale-down-unready-time",
	"max-startup-time":                                   "health is judged by --max-inactivity and --max-failing-time",
	"unremovable-node-recheck-timeout":                   "unremovable nodes are rechecked every iteration",
	"node-deletion-batcher-interval":                     "node deletions are not batched",
	"node-deletion-candidate-ttl":                        "removable-node markings are kept in memory only",
	"debugging-snapshot-enabled":                         "debugging snapshots are not available",
	"predicate-parallelism":                              "the simulation runs the scheduler's Filter plugins serially",
	"cluster-snapshot-parallelism":                       "the cluster snapshot is built serially",
	"record-duplicated-events":                           "events are always deduplicated by client-go's event correlator",
	"ignore-mirror-pods-utilization":                     "mirror (static) pods always count toward a node's utilization",
	"force-delete-unregistered-nodes":                    "DOKS nodes that never register are deleted through the DOKS API after --max-node-provision-time, within the pool's limits",
	"force-delete-failed-nodes":                          "failed nodes are deleted within the pool's limits only",
	"bypassed-scheduler-names":                           "only pods the scheduler marked unschedulable cause scale-ups",
	"allowed-scheduler-names":                            "pods of every scheduler count once their scheduler marked them unschedulable, as upstream does with the list empty",
	"max-nodegroup-binpacking-duration":                  "the estimate is bounded by node counts (--max-nodes-per-scaleup), not time",
	"max-binpacking-time":                                "the estimate is bounded by node counts (--max-nodes-per-scaleup), not time",
	"fastpath-binpacking-enabled":                        "the estimator has one algorithm",
	"enable-proactive-scaleup":                           "scale-ups are for existing pending pods only",
	"pod-injection-limit":                                "fake pods are never injected (no proactive scale-up)",
	"parallel-scale-up":                                  "node groups are scaled up one at a time",
	"salvo-scale-up":                                     "salvo scale-ups are not implemented",
	"salvo-scale-up-budget":                              "salvo scale-ups are not implemented",
	"scaleup-simulation-for-skipped-node-groups-enabled": "node groups in backoff are skipped without simulation",
	"capacity-quotas-enabled":                            "capacity quotas are not implemented",
	"force-ds":                                           "node templates include the DaemonSet pods that would run there, without blocking small groups",
	"scale-from-unschedulable":                           "a template never comes from a cordoned node",
	"node-info-cache-expire-time":                        "node templates are rebuilt from the DOKS pool, not cached",
	"enable-csi-node-aware-scheduling":                   "CSINode objects are not simulated",
	"max-node-skip-eval-time-tracker-enabled":            "max_node_skip_eval_duration_seconds is not exported",
	"node-removal-latency-tracking-enabled":              "node_removal_latency_seconds is not exported",
}

// refusedFlag is an upstream flag that makes no sense on DigitalOcean (other
// providers, node-group discovery, gRPC, the test
// library linked into upstream's binary). It is defined so that using it
// names the reason instead of failing as an unknown flag.
type refusedFlag struct {
	bool bool // takes no value (--flag means --flag=true)
	why  string
}

// refusedFlags are refused whatever their value: upstream's flags below, and
// Ginkgo's.
var refusedFlags = withGinkgoFlags(map[string]refusedFlag{
	"nodes":                                   {false, "node groups are DOKS node pools found through the DigitalOcean API: with node_pool_selection tags, pools with auto-scale off tagged k8s-cluster-autoscaler-enabled, -min:<n> and -max:<n>; with auto_scale, pools with auto-scale on, bounded by their min_nodes/max_nodes"},
	"node-group-auto-discovery":               {false, "node groups are DOKS node pools found through the DigitalOcean API, chosen by the cloud config's node_pool_selection (tags or auto_scale)"},
	"gpu-total":                               {false, "GPU limits are a GKE feature"},
	"grpc-expander-url":                       {false, "the grpc expander is not available"},
	"grpc-expander-cert":                      {false, "the grpc expander is not available"},
	"async-node-groups":                       {true, "node pools are created synchronously, within the loop that decides to create them"},
	"aws-use-static-instance-list":            {true, "an AWS flag"},
	"bulk-mig-instances-listing-enabled":      {true, "a GCE flag"},
	"gce-concurrent-refreshes":                {false, "a GCE flag"},
	"gce-mig-instances-min-refresh-wait-time": {false, "a GCE flag"},
	"regional":                                {true, "a GCE flag"},
	"cloud-provider-gce-lb-src-cidrs":         {false, "a GCE flag"},
	"cloud-provider-gce-l7lb-src-cidrs":       {false, "a GCE flag"},
	"clusterapi-cloud-config-authoritative":   {true, "a Cluster API flag"},
	"cluster-name":                            {false, "the cluster is named by cluster_id in the cloud config"},
	"user-agent":                              {false, "the DigitalOcean User-Agent is fixed: cluster-autoscaler-digitalocean/<version>"},
})

// Flags of the Ginkgo test library that upstream's binary links in by
// accident; the bool ones take no value.
var ginkgoFlags = map[string]bool{
	"always-emit-ginkgo-writer": true, "debug": true, "dry-run": true, "dryRun": true,
	"fail-fast": true, "fail-on-empty": true, "fail-on-pending": true, "failFast": true,
	"failOnPending": true, "flake-attempts": false, "flakeAttempts": false, "focus": false,
	"focus-file": false, "force-newlines": true, "github-output": true, "gojson-report": false,
	"grace-period": false, "json-report": false, "junit-report": false, "label-filter": false,
	"no-color": true, "noColor": true, "noisyPendings": true, "noisySkippings": true,
	"output-interceptor-mode": false, "parallel.host": false, "parallel.process": false,
	"parallel.total": false, "poll-progress-after": false, "poll-progress-interval": false,
	"progress": true, "randomize-all": true, "randomizeAllSpecs": true, "regexScansFilePath": true,
	"reportFile": false, "seed": false, "sem-ver-filter": false, "show-node-events": true,
	"silence-skips": true, "skip": false, "skip-file": false, "slow-spec-threshold": false,
	"slowSpecThreshold": false, "source-root": false, "succinct": true, "teamcity-report": false,
	"timeout": false, "trace": true, "v": true, "vv": true,
}

// withGinkgoFlags adds Ginkgo's flags, as ginkgo.<name>, to the refused
// flags.
func withGinkgoFlags(refused map[string]refusedFlag) map[string]refusedFlag {
	for name, isBool := range ginkgoFlags {
		refused["ginkgo."+name] = refusedFlag{isBool, "a flag of the Ginkgo test library linked into upstream's binary; it does nothing there either"}
	}
	return refused
}

// anyValue accepts any value for a refused flag, so that the refusal, not a
// parse error, is what the user reads.
type anyValue struct {
	v      string
	isBool bool
}

func (a *anyValue) String() string     { return a.v }
func (a *anyValue) Set(s string) error { a.v = s; return nil }
func (a *anyValue) Type() string {
	if a.isBool {
		return "bool"
	}
	return "string"
}

// addRefusedFlags defines refusedFlags, hidden from --help.
func addRefusedFlags(fs *pflag.FlagSet) {
	for name, r := range refusedFlags {
		fl := fs.VarPF(&anyValue{isBool: r.bool}, name, "", "Refused: "+r.why+".")
		if r.bool {
			fl.NoOptDefVal = "true"
		}
		fl.Hidden = true
	}
}

// refusals names every refused flag given on the command line and every
// default-only flag given another value than upstream's default.
func refusals(fs *pflag.FlagSet) []error {
	var errs []error
	fs.Visit(func(fl *pflag.Flag) {
		if r, ok := refusedFlags[fl.Name]; ok {
			errs = append(errs, fmt.Errorf("--%s is an upstream cluster-autoscaler flag this build does not support: %s", fl.Name, r.why))
			return
		}
		if why, ok := defaultOnlyFlags[fl.Name]; ok && fl.Value.String() != fl.DefValue {
			errs = append(errs, fmt.Errorf("--%s=%s is refused: this build supports only upstream's default (%s), because %s", fl.Name, fl.Value.String(), showDefault(fl.DefValue), why))
		}
	})
	return errs
}

func showDefault(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// RefusedNames lists refusedFlags sorted, for docs/flags.md; Ginkgo's flags
// are summed up as one.
func RefusedNames() []string {
	var out []string
	for n := range refusedFlags {
		if !strings.HasPrefix(n, "ginkgo.") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// RefusedReason is why the named upstream flag is refused ("" if it is not).
func RefusedReason(name string) string { return refusedFlags[name].why }

// FlagDocRow is the flag's row in docs/flags.md's table: name, default, meaning,
// and for a default-only flag why other values are refused.
func FlagDocRow(f *pflag.Flag) string {
	usage := f.Usage
	if why, ok := defaultOnlyFlags[f.Name]; ok {
		usage += " **Only upstream's default is accepted:** " + why + "."
	}
	return fmt.Sprintf("| `--%s` | `%s` | %s |", f.Name, showDefault(f.DefValue), strings.ReplaceAll(usage, "|", `\|`))
}
