// Package version holds the build's version, set by the Makefile through
// -ldflags "-X github.com/doks-autoscaler/cluster-autoscaler/version.Version=<v>".
package version

// Version is "dev" for builds that do not set it.
var Version = "dev"
