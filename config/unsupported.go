package config

import (
	"fmt"
	"strings"
)

// unsupportedFlags are upstream cluster-autoscaler flags this build does not
// implement. A user migrating from upstream gets told, rather than having the
// flag silently ignored or reported as merely unknown.
var unsupportedFlags = map[string]string{
	"nodes":                                 "DigitalOcean node groups are the DOKS node pools with auto_scale enabled; set min_nodes/max_nodes on the pool",
	"node-group-auto-discovery":             "DigitalOcean node groups are the DOKS node pools with auto_scale enabled",
	"gpu-total":                             "GPU limits are a GKE feature",
	"grpc-expander-url":                     "the grpc expander is not available",
	"grpc-expander-cert":                    "the grpc expander is not available",
	"node-autoprovisioning-enabled":         "DOKS node pools cannot be created by the autoscaler",
	"max-autoprovisioned-node-group-count":  "DOKS node pools cannot be created by the autoscaler",
	"scale-down-delay-type-local":           "scale-down delays are cluster-wide in this build",
	"scale-down-simulation-timeout":         "the scale-down simulation is bounded by --scale-down-non-empty-candidates-count instead",
	"max-node-startup-time":                 "registered nodes are judged by readiness and --scale-down-unready-time",
	"max-startup-time":                      "health is judged by --max-inactivity and --max-failing-time",
	"daemonset-eviction-for-empty-nodes":    "DaemonSet pods are left to DOKS's node drain",
	"daemonset-eviction-for-occupied-nodes": "DaemonSet pods are left to DOKS's node drain",
	"cordon-node-before-terminating":        "nodes are always tainted ToBeDeletedByClusterAutoscaler before draining",
	"node-deletion-delay-timeout":           "delay-deletion annotations are not supported",
	"unremovable-node-recheck-timeout":      "unremovable nodes are rechecked every iteration",
	"max-scale-down-parallelism":            "empty nodes are bounded by --max-empty-bulk-delete and non-empty ones drain one at a time",
	"max-drain-parallelism":                 "non-empty nodes drain one at a time",
	"enforce-node-group-min-size":           "DOKS keeps a pool at its min_nodes itself",
	"debugging-snapshot-enabled":            "debugging snapshots are not available",
	"leader-elect-resource-namespace":       "the Lease lives in --namespace (upstream ignores this flag too)",
	"enable-dynamic-resource-allocation":    "dynamic resource allocation is not supported",
	"drain-priority-config":                 "pods are evicted together, bounded by --max-graceful-termination-sec",
	"predicate-parallelism":                 "the simulation runs the scheduler's Filter plugins serially",
	"balancing-ignore-label":                "similar node groups are compared with a fixed set of ignored labels",
	"balancing-label":                       "similar node groups are compared with a fixed set of ignored labels",
	"cloud-provider-gce-lb-src-cidrs":       "a GCE flag",
	"cloud-provider-gce-l7lb-src-cidrs":     "a GCE flag",
	"aws-use-static-instance-list":          "an AWS flag",
	"regional":                              "a GCE flag",
	"cluster-name":                          "the cluster is named by cluster_id in the cloud config",
	"feature-gates":                         "no feature gates are implemented",
	"record-duplicated-events":              "events are deduplicated by the client",
	"scale-down-candidates-pool-ratio":      "candidates are bounded by --scale-down-non-empty-candidates-count",
	"scale-down-candidates-pool-min-count":  "candidates are bounded by --scale-down-non-empty-candidates-count",
	"max-bulk-soft-taint-count":             "unneeded nodes are not soft-tainted (PreferNoSchedule) in this build",
	"max-bulk-soft-taint-time":              "unneeded nodes are not soft-tainted (PreferNoSchedule) in this build",
	"ignore-mirror-pods-utilization":        "mirror (static) pods always count toward a node's utilization",
	"max-free-difference-ratio":             "similar node groups are compared with fixed tolerances",
	"max-allocatable-difference-ratio":      "similar node groups are compared with fixed tolerances",
	"force-delete-unregistered-nodes":       "DOKS nodes that never register are deleted through the DOKS API after --max-node-provision-time",
	"node-delete-delay-after-taint":         "a node is deleted as soon as its drain ends",
	"user-agent":                            "the DigitalOcean User-Agent is fixed: cluster-autoscaler-digitalocean/<version>",
	"bypassed-scheduler-names":              "only pods the scheduler marked unschedulable cause scale-ups",
	"enable-provisioning-requests":          "ProvisioningRequests are not supported",
	"async-node-groups":                     "DOKS node pools cannot be created by the autoscaler",
	"max-nodegroup-binpacking-duration":     "the estimate is bounded by node counts (--max-nodes-per-scaleup), not time",
}

// CheckUnsupported returns an error naming the first upstream flag in args
// that this build does not implement.
func CheckUnsupported(args []string) error {
	for _, arg := range args {
		if arg == "--" {
			return nil
		}
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name := strings.TrimLeft(arg, "-")
		if i := strings.IndexByte(name, '='); i >= 0 {
			name = name[:i]
		}
		if why, ok := unsupportedFlags[name]; ok {
			return fmt.Errorf("flag --%s is an upstream cluster-autoscaler flag this build does not support: %s", name, why)
		}
	}
	return nil
}
