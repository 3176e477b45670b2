// Command sandbox runs a local DOKS cluster (in-process control plane, DOKS API simulator,
// node agent) until interrupted, and prints how to point kubectl and the autoscaler at it:
//
//	go run ./cmd/sandbox [--dir DIR] [--pools workers:s-2vcpu-4gb:1:1-5,fixed:s-2vcpu-4gb:1]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
)

// DefaultPools are the sandbox's pools unless told otherwise: one autoscaled
// pool of 1..5 nodes starting at 1, and one fixed node.
const DefaultPools = "workers:s-2vcpu-4gb:1:1-5,fixed:s-2vcpu-4gb:1"

type options struct {
	dir         string
	pools       string
	region      string
	bootDelay   time.Duration
	deleteDelay time.Duration
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.dir, "dir", "", "directory for kubeconfig, cloud-config, token and log files (default: a new temp dir, removed on exit)")
	fs.StringVar(&o.pools, "pools", DefaultPools, "node pools: name:size:count[:min-max],... (a min-max range makes a pool autoscaled)")
	fs.StringVar(&o.region, "region", sandbox.DefaultRegion, "region label of the simulated nodes")
	fs.DurationVar(&o.bootDelay, "boot-delay", sandbox.DefaultBootDelay, "how long a new droplet provisions before its node registers")
	fs.DurationVar(&o.deleteDelay, "delete-delay", sandbox.DefaultDeleteDelay, "how long a deleted droplet lingers")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.bootDelay <= 0 || o.deleteDelay <= 0 {
		return o, errors.New("--boot-delay and --delete-delay must be positive")
	}
	return o, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sandbox:", err)
			os.Exit(1)
		}
		os.Exit(2)
	}
}

// run starts the sandbox, prints its coordinates and waits for ctx to end.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	o, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	pools, err := sandbox.ParsePools(o.pools)
	if err != nil {
		return err
	}
	dir := o.dir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "Starting the DOKS sandbox (etcd, kube-apiserver, kube-scheduler, controllers, DOKS API simulator, node agent)...")
	started := time.Now()
	sb, err := sandbox.Start(sandbox.Options{Dir: dir, Region: o.region, BootDelay: o.bootDelay, DeleteDelay: o.deleteDelay, Pools: pools})
	if err != nil {
		return err
	}
	defer sb.Stop()
	printBanner(out, sb, time.Since(started))
	<-ctx.Done()
	fmt.Fprintln(out, "\nStopping the sandbox...")
	return nil
}

func printBanner(out io.Writer, sb *sandbox.Sandbox, took time.Duration) {
	fmt.Fprintf(out, "\nDOKS sandbox ready in %v (cluster %s).\n\n", took.Round(time.Millisecond), sb.ClusterID)
	fmt.Fprintf(out, "  kubeconfig:         %s\n", sb.KubeconfigPath)
	fmt.Fprintf(out, "  DOKS API simulator: %s\n", sb.DOKS.URL())
	fmt.Fprintf(out, "  cloud-config:       %s\n", sb.CloudConfigPath)
	fmt.Fprintf(out, "  logs:               %s\n\n", sb.LogPath)
	fmt.Fprintln(out, "Node pools:")
	for _, p := range sb.DOKS.Pools() {
		if p.AutoScale {
			fmt.Fprintf(out, "  %-12s %d × %s, autoscaled %d..%d\n", p.Name, p.Count, p.Size, p.MinNodes, p.MaxNodes)
		} else {
			fmt.Fprintf(out, "  %-12s %d × %s, not autoscaled\n", p.Name, p.Count, p.Size)
		}
	}
	fmt.Fprintf(out, "\nLook at the cluster:\n\n  kubectl --kubeconfig %s get nodes -L doks.digitalocean.com/node-pool\n", sb.KubeconfigPath)
	fmt.Fprintf(out, "\nRun the autoscaler against it (from the repository root):\n\n"+
		"  go build -o bin/cluster-autoscaler . && ./bin/cluster-autoscaler \\\n"+
		"    --cloud-provider=digitalocean --cloud-config=%s \\\n"+
		"    --kubeconfig=%s \\\n"+
		"    --namespace=kube-system --leader-elect=false --scan-interval=10s --v=4\n", sb.CloudConfigPath, sb.KubeconfigPath)
	fmt.Fprintf(out, "\nPress Ctrl-C to stop.\n")
}
