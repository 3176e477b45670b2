package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// toBeDeletedTaint is the autoscaler's deletion taint (upstream's key).
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// scaleDownRun is one idle-cluster scale-down: every pool starts at nodesPerPool nodes,
// min 1, and the autoscaler runs with --scale-down-unneeded-time=1m
// --scale-down-delay-after-add=0s and everything else at its default. With podsPerNode > 0
// every node runs that many pods of one Deployment under a PodDisruptionBudget
// (minAvailable 50%), so nodes must be drained before they go. (With maxUnavailable 1,
// each eviction leaves the budget at 0 until the replacement is ready, which makes every
// other node unremovable for a moment and restarts its unneeded time, upstream's
// planner as this one: a scale-down that takes a --scale-down-unneeded-time per node.)
type scaleDownRun struct {
	name                 string
	pools, nodesPerPool  int
	podsPerNode          int
	maxScaleDownParallel int // the flag's default, for the report
}

type scaleDownResult struct {
	toMin          time.Duration
	requests       int
	byOp           map[string]int
	maxInFlight    int // tainted nodes DigitalOcean does not list as deleting yet
	maxDeleting    int // nodes DigitalOcean lists as deleting
	pdbViolated    bool
	minPDBHeadroom int32
	removed        int
	timeline       *timeline
}

func runScaleDowns(ctx context.Context, c config, out io.Writer) error {
	runs := []scaleDownRun{
		{name: "empty", pools: c.sdPools, nodesPerPool: c.sdNodesPerPool, maxScaleDownParallel: 10},
		{name: "drain", pools: c.sdDrainPools, nodesPerPool: c.sdDrainNodesPerPool, podsPerNode: 1, maxScaleDownParallel: 10},
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nidle-cluster scale-down\tbinary\tnodes\ttime to min\tDO requests\tmax removals in flight\tmax DO nodes deleting\tPDB violated\n")
	for _, r := range runs {
		if r.pools == 0 {
			continue // --scale-down-pools=0 or --scale-down-drain-pools=0 skips the run
		}
		// Each binary in turn (--upstream-binary), on a sandbox of its own.
		for _, b := range c.builds {
			cb := c
			cb.binary, cb.dir = b.path, b.dir
			if err := r.report(ctx, cb, b.name, w, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// report runs r with c's binary and prints its row (and, for empty nodes,
// its timeline).
func (r scaleDownRun) report(ctx context.Context, c config, binary string, w *tabwriter.Writer, out io.Writer) error {
	res, err := r.run(ctx, c, out)
	if err != nil {
		return fmt.Errorf("scale-down %s (%s): %w", r.name, binary, err)
	}
	pdb := "no"
	if r.podsPerNode == 0 {
		pdb = "-"
	} else if res.pdbViolated {
		pdb = "YES"
	}
	fmt.Fprintf(w, "%s: %d pools × %d → 1 each\t%s\t%d removed\t%v\t%d (%s)\t%d (--max-scale-down-parallelism=%d)\t%d\t%s\n",
		r.name, r.pools, r.nodesPerPool, binary, res.removed, res.toMin.Round(100*time.Millisecond), res.requests, opsSummary(res.byOp),
		res.maxInFlight, r.maxScaleDownParallel, res.maxDeleting, pdb)
	if err := w.Flush(); err != nil {
		return err
	}
	if c.sdTimeline && r.podsPerNode == 0 {
		if err := res.timeline.print(out); err != nil {
			return err
		}
	}
	return nil
}

func (r scaleDownRun) run(ctx context.Context, c config, out io.Writer) (scaleDownResult, error) {
	var res scaleDownResult
	var pools []doks.PoolSpec
	for i := 0; i < r.pools; i++ {
		pools = append(pools, doks.PoolSpec{Name: fmt.Sprintf("pool-%02d", i+1), Size: "s-2vcpu-4gb", Count: r.nodesPerPool,
			AutoScale: true, MinNodes: 1, MaxNodes: r.nodesPerPool})
	}
	fmt.Fprintf(out, "scale-down %s: starting a sandbox with %d pools × %d nodes...\n", r.name, r.pools, r.nodesPerPool)
	sb, err := sandbox.Start(sandbox.Options{Dir: filepath.Join(c.dir, "scale-down-"+r.name), BootDelay: c.bootDelay, Pools: pools})
	if err != nil {
		return res, err
	}
	defer sb.Stop()
	if err := sb.ControlPlane.EnsureNamespace(ctx, "bench"); err != nil {
		return res, err
	}
	replicas := r.pools * r.nodesPerPool * r.podsPerNode
	if replicas > 0 {
		if err := createDeployment(ctx, sb, "spread", replicas, "100m"); err != nil {
			return res, err
		}
		if err := waitRunning(ctx, sb, "spread", replicas, c.timeout); err != nil {
			return res, err
		}
		if err := createPDB(ctx, sb, "spread"); err != nil {
			return res, err
		}
	}

	before := sb.DOKS.TotalRequests()
	byOpBefore := requestsByOp(sb)
	args := append(sb.AutoscalerArgs(), "--namespace=bench", "--leader-elect=false", "--address=127.0.0.1:0",
		"--scale-down-unneeded-time=1m", "--scale-down-delay-after-add=0s", "--v=2")
	start := time.Now()
	ca, err := sandbox.RunAutoscaler(c.binary, args, filepath.Join(c.dir, "scale-down-"+r.name+".log"))
	if err != nil {
		return res, err
	}
	defer ca.Stop(15 * time.Second)
	res.minPDBHeadroom = 1 << 30
	res.timeline = newTimeline(start)
	err = poll(ctx, c.timeout, 100*time.Millisecond, func() (bool, error) {
		inFlight, deleting, err := deletionCounts(ctx, sb, res.timeline)
		if err != nil {
			return false, err
		}
		res.maxInFlight = max(res.maxInFlight, inFlight)
		res.maxDeleting = max(res.maxDeleting, deleting)
		if replicas > 0 {
			headroom, err := pdbHeadroom(ctx, sb, "spread")
			if err != nil {
				return false, err
			}
			res.minPDBHeadroom = min(res.minPDBHeadroom, headroom)
			res.pdbViolated = res.pdbViolated || headroom < 0
		}
		return targetSum(sb) == r.pools && deleting == 0, nil
	})
	if err != nil {
		return res, fmt.Errorf("%w (see %s)", err, ca.LogPath)
	}
	res.toMin = time.Since(start)
	res.requests = sb.DOKS.TotalRequests() - before
	res.byOp = requestsByOp(sb)
	for op, n := range byOpBefore {
		res.byOp[op] -= n
	}
	res.removed = r.pools * (r.nodesPerPool - 1)
	if err := res.timeline.readWaits(ca.LogPath); err != nil {
		return res, err
	}
	return res, nil
}

// deletionCounts counts the nodes the autoscaler has tainted for deletion
// whose DigitalOcean node is not deleting yet (its removals in flight, as it
// counts them against --max-scale-down-parallelism), and the nodes
// DigitalOcean lists as deleting.
// Each node's taint and deletion are noted in tl when first seen.
func deletionCounts(ctx context.Context, sb *sandbox.Sandbox, tl *timeline) (inFlight, deleting int, err error) {
	now := time.Now()
	state := map[string]string{}
	for _, p := range sb.DOKS.Pools() {
		for _, n := range p.Nodes {
			if n.Status != nil {
				state[n.Name] = n.Status.State
			}
			if n.Status != nil && n.Status.State == doks.StateDeleting {
				deleting++
				tl.deleting(n.Name, now)
			}
		}
	}
	nodes, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, n := range nodes.Items {
		for _, t := range n.Spec.Taints {
			if t.Key != toBeDeletedTaint {
				continue
			}
			tl.tainted(n.Name, now)
			if state[n.Name] != doks.StateDeleting && state[n.Name] != "" {
				inFlight++
			}
		}
	}
	return inFlight, deleting, nil
}

func createPDB(ctx context.Context, sb *sandbox.Sandbox, app string) error {
	half := intstr.FromString("50%")
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "bench"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &half,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	_, err := sb.Kube.PolicyV1().PodDisruptionBudgets("bench").Create(ctx, pdb, metav1.CreateOptions{})
	return err
}

// pdbHeadroom is the PDB's running pods minus the minimum it asks for (half the
// replicas, rounded up), counted from the pods themselves (the disruption controller's
// status may lag): below 0 the budget is violated.
func pdbHeadroom(ctx context.Context, sb *sandbox.Sandbox, app string) (int32, error) {
	running, err := runningPods(ctx, sb, app)
	if err != nil {
		return 0, err
	}
	d, err := sb.Kube.AppsV1().Deployments("bench").Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return int32(running) - (*d.Spec.Replicas+1)/2, nil
}

func requestsByOp(sb *sandbox.Sandbox) map[string]int {
	out := map[string]int{}
	for _, op := range []string{doks.OpListNodePools, doks.OpGetNodePool, doks.OpUpdateNodePool, doks.OpDeleteNode,
		doks.OpGetNodePoolTemplate, doks.OpListSizes, doks.OpGetCluster} {
		out[op] = sb.DOKS.RequestCount(op)
	}
	return out
}

func opsSummary(byOp map[string]int) string {
	s := ""
	for _, op := range []string{doks.OpListNodePools, doks.OpDeleteNode, doks.OpGetNodePoolTemplate, doks.OpListSizes, doks.OpGetCluster, doks.OpUpdateNodePool} {
		if byOp[op] > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", op, byOp[op])
		}
	}
	return s
}
