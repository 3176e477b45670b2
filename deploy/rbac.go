// Package deploy embeds the RBAC manifests of deploy/ for the preflight
// check (package preflight), so the rights it asks the API server about are
// the ones the manifests grant, read from the same files: they cannot drift
// apart. The chart's RBAC equals these (charts: TestChartRBACEqualsDeploy).
package deploy

import _ "embed"

// ClusterRole is deploy/clusterrole.yaml: the autoscaler's cluster-wide rights.
//
//go:embed clusterrole.yaml
var ClusterRole []byte

// Role is deploy/role.yaml: the autoscaler's rights in its own namespace
// (--namespace), written there for kube-system.
//
//go:embed role.yaml
var Role []byte
