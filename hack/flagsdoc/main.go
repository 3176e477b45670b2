// Command flagsdoc prints the README's flag table from the flags the binary
// registers, so the table cannot drift from the code (config's tests check it).
package main

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

func main() {
	fs := flag.NewFlagSet("cluster-autoscaler", flag.ContinueOnError)
	config.NewFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fmt.Println("| flag | default | meaning |")
	fmt.Println("|---|---|---|")
	fs.VisitAll(func(f *flag.Flag) { row(f) })
	// klog's flags follow: the binary accepts all of them.
	klogFlags.VisitAll(func(f *flag.Flag) { row(f) })
}

func row(f *flag.Flag) {
	def := f.DefValue
	if def == "" {
		def = `""`
	}
	usage := strings.ReplaceAll(f.Usage, "|", `\|`)
	fmt.Printf("| `--%s` | `%s` | %s |\n", f.Name, def, usage)
}
