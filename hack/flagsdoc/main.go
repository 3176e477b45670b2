// Command flagsdoc prints docs/flags.md's flag tables from the flags the binary
// registers, so the tables cannot drift from the code (config's tests check
// them).
package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

func main() {
	fs := pflag.NewFlagSet("cluster-autoscaler", pflag.ContinueOnError)
	config.NewFlags(fs)
	fs.SortFlags = true
	fmt.Println("| flag | default | meaning |")
	fmt.Println("|---|---|---|")
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			fmt.Println(config.FlagDocRow(f))
		}
	})
	fmt.Println()
	fmt.Println("Upstream flags refused whatever their value:")
	fmt.Println()
	fmt.Println("| flag | why |")
	fmt.Println("|---|---|")
	for _, name := range config.RefusedNames() {
		fmt.Printf("| `--%s` | %s |\n", name, escape(config.RefusedReason(name)))
	}
	fmt.Println("| `--ginkgo.*` | flags of the Ginkgo test library linked into upstream's binary; they do nothing there either |")
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
