// Command doks-simulator runs the DOKS API simulator standalone, for trying
// the autoscaler against a fake DigitalOcean:
//
//	go run ./cmd/doks-simulator --addr 127.0.0.1:8081 --token t --cluster-id 123e4567-e89b-12d3-a456-426614174000 --pools 3
//
// It prints the base URL and a cloud-config JSON for --cloud-config, then
// serves until interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

type options struct {
	addr           string
	token          string
	clusterID      string
	pools          int
	fixedPools     int
	size           string
	count          int
	minNodes       int
	maxNodes       int
	bootDelay      time.Duration
	deleteDelay    time.Duration
	dropletLimit   int
	cloudConfigOut string
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("doks-simulator", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8081", "listen address (keep it on loopback: the provider accepts plain http only there)")
	fs.StringVar(&o.token, "token", "", "bearer token the simulator requires (required)")
	fs.StringVar(&o.clusterID, "cluster-id", "", "cluster ID served (required)")
	fs.IntVar(&o.pools, "pools", 1, "number of autoscaled node pools to create")
	fs.IntVar(&o.fixedPools, "fixed-pools", 0, "number of node pools without autoscaling to create")
	fs.StringVar(&o.size, "size", "s-2vcpu-4gb", "Droplet size of the created pools")
	fs.IntVar(&o.count, "count", 1, "initial node count of each pool")
	fs.IntVar(&o.minNodes, "min-nodes", 1, "min_nodes of the autoscaled pools")
	fs.IntVar(&o.maxNodes, "max-nodes", 5, "max_nodes of the autoscaled pools")
	fs.DurationVar(&o.bootDelay, "boot-delay", 30*time.Second, "time a new node stays provisioning (0: running at once; negative: forever)")
	fs.DurationVar(&o.deleteDelay, "delete-delay", 10*time.Second, "time a deleted node stays draining/deleting (0: gone at once; negative: forever)")
	fs.IntVar(&o.dropletLimit, "droplet-limit", doks.DefaultDropletLimit, "the account's droplet limit: a pool update that would exceed it is refused with DigitalOcean's 422 (0: no limit)")
	fs.StringVar(&o.cloudConfigOut, "cloud-config-out", "", "also write the cloud-config JSON to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.token == "":
		return o, errors.New("--token is required")
	case o.clusterID == "":
		return o, errors.New("--cluster-id is required")
	case o.pools < 0 || o.fixedPools < 0:
		return o, errors.New("--pools and --fixed-pools must not be negative")
	case o.dropletLimit < 0:
		return o, errors.New("--droplet-limit must not be negative")
	}
	return o, nil
}

// run starts the simulator and serves until ctx ends.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	o, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	s := doks.NewServer(doks.Options{ClusterID: o.clusterID, Token: o.token, BootDelay: o.bootDelay, DeleteDelay: o.deleteDelay, DropletLimit: o.dropletLimit})
	for i := 0; i < o.pools; i++ {
		if _, err := s.CreatePool(doks.PoolSpec{Name: fmt.Sprintf("pool-%d", i+1), Size: o.size, Count: o.count,
			AutoScale: true, MinNodes: o.minNodes, MaxNodes: o.maxNodes}); err != nil {
			return fmt.Errorf("creating autoscaled pool %d: %w", i+1, err)
		}
	}
	for i := 0; i < o.fixedPools; i++ {
		if _, err := s.CreatePool(doks.PoolSpec{Name: fmt.Sprintf("fixed-%d", i+1), Size: o.size, Count: o.count}); err != nil {
			return fmt.Errorf("creating fixed pool %d: %w", i+1, err)
		}
	}
	if err := s.Start(o.addr); err != nil {
		return err
	}
	defer s.Close()

	cfg, _ := json.MarshalIndent(map[string]string{"cluster_id": o.clusterID, "token": o.token, "url": s.URL()}, "", "  ")
	fmt.Fprintf(out, "DOKS API simulator serving cluster %s at %s\n", o.clusterID, s.URL())
	fmt.Fprintf(out, "cloud-config (--cloud-config):\n%s\n", cfg)
	if o.cloudConfigOut != "" {
		if err := os.WriteFile(o.cloudConfigOut, append(cfg, '\n'), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", o.cloudConfigOut, err)
		}
		fmt.Fprintf(out, "cloud-config written to %s\n", o.cloudConfigOut)
	}
	<-ctx.Done()
	klog.Infof("doks simulator: shutting down after %d requests", s.TotalRequests())
	return nil
}

func main() {
	klog.InitFlags(nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "doks-simulator:", err)
		os.Exit(2)
	}
}
