package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Command is the subcommand's name: `cluster-autoscaler preflight ...`.
const Command = "preflight"

// Main runs `cluster-autoscaler preflight` with args (those after the word
// preflight): the autoscaler's own flags, read by the same code, plus
// -o/--output text|json. It returns the exit code: 0 when nothing blocks, 1
// when a check failed, 2 for a bad command line.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("cluster-autoscaler "+Command, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := config.NewFlags(fs)
	output := fs.StringP("output", "o", "text", "Output format of the preflight check: text (one line per check) or json (an array of {check, verdict, detail, fix}).")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cluster-autoscaler preflight --cloud-provider=digitalocean --cloud-config=<file> [--kubeconfig=<file>] [-o json] [the autoscaler's flags]\n\n"+
			"Checks, reading only, that the autoscaler would work with this configuration (docs/preflight.md).\n"+
			"Exit code 0: nothing blocks; 1: a check failed; 2: a bad command line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	opts, err := flags.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		var problems config.FlagErrors
		if errors.As(err, &problems) {
			for _, p := range problems {
				fmt.Fprintln(stderr, "error:", p)
			}
		} else {
			fmt.Fprintln(stderr, "error:", err)
		}
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "error: --output=%s: want text or json\n", *output)
		return 2
	}
	if err := flags.Logging().Apply(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report := Run(ctx, Options{Autoscaling: opts})
	write := report.WriteText
	if *output == "json" {
		write = report.WriteJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return report.ExitCode()
}
