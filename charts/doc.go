// Package charts holds the Helm chart(s) of the autoscaler. The tests render
// the chart with helm itself (helm_test.go: `helm install --dry-run=client`,
// `helm lint --strict`), then decode the objects and check them, and their
// agreement with deploy/, with internal/manifestcheck.
package charts
