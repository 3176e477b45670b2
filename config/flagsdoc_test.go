package config

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// docs/flags.md is where operators look up flags: every flag the binary
// accepts must be listed there with its real default, and every refused
// upstream flag with its reason (hack/flagsdoc prints the tables).
func TestFlagsDocListsEveryFlagWithItsDefault(t *testing.T) {
	doc, err := os.ReadFile("../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	NewFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if row := FlagDocRow(f); !strings.Contains(string(doc), row) {
			t.Errorf("docs/flags.md has no row %q (regenerate the table with go run ./hack/flagsdoc)", row)
		}
	})
	for _, name := range RefusedNames() {
		row := "| `--" + name + "` | " + RefusedReason(name) + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/flags.md has no row %q (regenerate the table with go run ./hack/flagsdoc)", row)
		}
	}
}
