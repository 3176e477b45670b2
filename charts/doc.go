// Package charts holds the Helm chart(s) of the autoscaler. The tests render
// the chart with helm itself (helm_test.go: `helm install --dry-run=client`,
// `helm lint --strict`), then decode and check the objects like deploy/'s
// manifests.
package charts
