package config

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// The README is where operators look up flags: every flag the binary accepts
// must be listed there with its real default (hack/flagsdoc prints the table).
func TestREADMEListsEveryFlagWithItsDefault(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	NewFlags(fs)
	// main registers klog's flags on the same set: they are accepted too.
	klog.InitFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		row := fmt.Sprintf("| `--%s` | `%s` |", f.Name, def)
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no row %q (regenerate the table with go run ./hack/flagsdoc)", row)
		}
	})
}
