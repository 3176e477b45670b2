// Package charts holds the Helm chart(s) of the autoscaler. Helm itself is
// not needed to test them: chart_test.go renders every template with Go's
// text/template and the few Helm functions the templates use, then decodes
// and checks the result like deploy/'s manifests.
package charts
