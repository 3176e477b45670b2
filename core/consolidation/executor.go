package consolidation

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown"
	"github.com/doks-autoscaler/cluster-autoscaler/core/scaledown/deletiontracker"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/drain"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Provisioner adds a replacement's nodes: scale-up's executor, so that a
// creation or increase is made, and its faults handled (a lost answer is
// reconciled by listing, never sent twice), as any scale-up's.
type Provisioner interface {
	Provision(g cloudprovider.NodeGroup, count int, tmpl *framework.NodeInfo, now time.Time) error
}

// Drainer taints, drains through the Eviction API and deletes nodes, and
// gives a node back (untainted) when that fails: scale-down's actuator,
// which reports each removal's end to the deletion tracker.
type Drainer interface {
	Drain(ctx context.Context, nodes []*scaledown.UnneededNode)
}

// Result is how a command stands in an Outcome.
type Result string

const (
	// Planned: proposed for the first time (it acts once it has held for
	// the stabilization window).
	Planned Result = "planned"
	// DrainStarted: the old nodes were handed to the drain; Evicted lists
	// the pods it evicts.
	DrainStarted Result = "drain-started"
	// Succeeded: every removed node was deleted.
	Succeeded Result = "succeeded"
	// Aborted: stopped before its end; what it did is left as ordinary
	// nodes (see Executor).
	Aborted Result = "aborted"
	// Unprofitable: refused by the planner because its saving over the
	// horizon does not pay for its disruption (see CostModel).
	Unprofitable Result = "unprofitable"
)

// Outcome is what became of a command, for core/report.
type Outcome struct {
	Command Command
	Result  Result
	// Reason says why a command was aborted.
	Reason string
	// Evicted are the pods a Draining command evicts.
	Evicted []*apiv1.Pod
}

// Stage is where a command in flight stands.
type Stage string

const (
	// Provisioning: the replacement was asked for; waiting for it to be
	// registered and Ready.
	Provisioning Stage = "Provisioning"
	// Draining: the old nodes are being drained and deleted.
	Draining Stage = "Draining"
)

// View is the cluster as the executor sees it in one loop.
type View struct {
	Nodes      []*apiv1.Node
	PodsByNode map[string][]*apiv1.Pod
	// Ready tells a node registered and ready to run pods.
	Ready func(*apiv1.Node) bool
	// GroupOf returns a node's node group ID ("" for none, or nil).
	GroupOf func(node string) string
	// For the simulation run again before the old nodes are drained.
	Snapshot     *simulator.ClusterSnapshot
	Checker      *simulator.PredicateChecker
	DrainOptions drain.Options
	PDBs         []*policyv1.PodDisruptionBudget
	// Busy says why the old nodes must not be drained in this loop (""
	// when they may): scale-down's drains are in flight, and their pods
	// need room the simulation does not see.
	Busy string
	Now  time.Time
}

// Executor carries out one command at a time, make before break, across
// loop iterations:
//   - Replace: the replacement is asked for (Provision); each loop then
//     counts the new Ready nodes of its size. When enough are Ready, the
//     command is simulated again on the cluster as it now is (the new
//     nodes real) and the old nodes are handed to the drain; if it no
//     longer holds, or the nodes do not come within the provision
//     timeout, it is aborted before any pod moved.
//   - Delete: the old nodes are handed to the drain at once (Plan ran on
//     this loop's snapshot).
//   - Draining ends when the deletion tracker reports every old node's
//     removal ended: all deleted is success; any failure aborts (the drain
//     gave that node back untainted; the nodes already deleted stay so).
//
// An aborted command undoes nothing by hand: new nodes are ordinary nodes,
// which scale-down removes when unneeded, as after any scale-up. The state
// lives in memory only: after a restart no command is resumed; start-up
// removes the ToBeDeletedByClusterAutoscaler taints of nodes not being
// deleted, and the planner starts again from the cluster as it is.
type Executor struct {
	prov    Provisioner
	drainer Drainer
	// provisionTimeout bounds the wait for a replacement's nodes.
	provisionTimeout func(*Replacement) time.Duration

	mu  sync.Mutex
	cur *inFlight
}

type inFlight struct {
	cmd   Command
	phase Stage
	since time.Time
	// known: the nodes that existed when the replacement was asked for.
	known map[string]bool
	// ended: the old nodes whose removal ended, and how.
	ended map[string]deletiontracker.Outcome
}

// NewExecutor returns an executor; provisionTimeout bounds the wait for a
// replacement's nodes to be Ready: its group's own provision time (a GPU
// size's may be longer than a small droplet's), as for any scale-up.
func NewExecutor(prov Provisioner, drainer Drainer, provisionTimeout func(*Replacement) time.Duration) *Executor {
	return &Executor{prov: prov, drainer: drainer, provisionTimeout: provisionTimeout}
}

// InFlight returns the command in flight and its phase; nil when idle.
func (e *Executor) InFlight() (*Command, Stage, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return nil, "", time.Time{}
	}
	c := e.cur.cmd
	return &c, e.cur.phase, e.cur.since
}

// RemovalEnded is a deletiontracker.Listener: it notes the end of an old
// node's removal (the next Step reads it).
func (e *Executor) RemovalEnded(node, _ string, outcome deletiontracker.Outcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil || e.cur.phase != Draining {
		return
	}
	for _, c := range e.cur.cmd.Remove {
		if c.Node.Name == node {
			e.cur.ended[node] = outcome
		}
	}
}

// Start begins cmd (the executor must be idle) and returns an outcome
// when it ended at once.
func (e *Executor) Start(ctx context.Context, cmd Command, v View) []Outcome {
	e.mu.Lock()
	if e.cur != nil {
		e.mu.Unlock()
		return nil
	}
	e.cur = &inFlight{cmd: cmd, since: v.Now, ended: map[string]deletiontracker.Outcome{}}
	e.mu.Unlock()
	if cmd.Kind == Delete {
		return e.drain(ctx, v)
	}
	known := make(map[string]bool, len(v.Nodes))
	for _, n := range v.Nodes {
		known[n.Name] = true
	}
	e.mu.Lock()
	e.cur.phase, e.cur.known = Provisioning, known
	e.mu.Unlock()
	klog.InfoS("Consolidation: adding the replacement first", "command", cmd.String())
	if err := e.prov.Provision(cmd.Replacement.Group, cmd.Count, cmd.Replacement.Template, v.Now); err != nil {
		return e.abort(fmt.Sprintf("adding %d %s node(s) failed: %v", cmd.Count, cmd.Replacement.Size, err))
	}
	return nil
}

// Step moves the command in flight on: see Executor.
func (e *Executor) Step(ctx context.Context, v View) []Outcome {
	e.mu.Lock()
	cur := e.cur
	e.mu.Unlock()
	if cur == nil {
		return nil
	}
	switch cur.phase {
	case Provisioning:
		return e.stepProvisioning(ctx, cur, v)
	case Draining:
		return e.stepDraining(cur)
	}
	return nil
}

func (e *Executor) stepProvisioning(ctx context.Context, cur *inFlight, v View) []Outcome {
	cmd := cur.cmd
	ready := newReadyNodes(cur.known, cmd.Replacement, v)
	if ready < cmd.Count {
		if limit := e.provisionTimeout(cmd.Replacement); v.Now.Sub(cur.since) > limit {
			return e.abort(fmt.Sprintf("%d of %d new %s node(s) Ready after %s", ready, cmd.Count, cmd.Replacement.Size, limit))
		}
		klog.V(2).InfoS("Consolidation: waiting for the replacement", "command", cmd.String(), "ready", ready, "want", cmd.Count)
		return nil
	}
	if why := stillDisruptable(cmd, v); why != "" {
		return e.abort(why)
	}
	if v.Busy != "" {
		klog.V(2).InfoS("Consolidation: the replacement is Ready; the drain waits", "command", cmd.String(), "why", v.Busy)
		return nil
	}
	// The replacement is real now: the pods must fit the cluster as it is.
	if ok, why := Fits(v.Snapshot, v.Checker, v.DrainOptions, v.PDBs, cmd.Remove, nil, v.Now); !ok {
		return e.abort("the old nodes' pods no longer fit once the replacement is Ready: " + why)
	}
	return e.drain(ctx, v)
}

func (e *Executor) stepDraining(cur *inFlight) []Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(cur.ended) < len(cur.cmd.Remove) {
		return nil
	}
	var failed []string
	for _, c := range cur.cmd.Remove {
		if cur.ended[c.Node.Name] != deletiontracker.Deleted {
			failed = append(failed, fmt.Sprintf("%s (%s)", c.Node.Name, cur.ended[c.Node.Name]))
		}
	}
	e.cur = nil
	if len(failed) > 0 {
		klog.InfoS("Consolidation: aborted: the drain gave nodes back", "command", cur.cmd.String(), "nodes", failed)
		return []Outcome{{Command: cur.cmd, Result: Aborted, Reason: fmt.Sprintf("removal failed for %v; those nodes were given back", failed)}}
	}
	klog.InfoS("Consolidation: done", "command", cur.cmd.String())
	return []Outcome{{Command: cur.cmd, Result: Succeeded}}
}

// drain hands the old nodes to the drain (taint, evict, delete).
func (e *Executor) drain(ctx context.Context, v View) []Outcome {
	e.mu.Lock()
	e.cur.phase, e.cur.since = Draining, v.Now
	cmd := e.cur.cmd
	e.mu.Unlock()
	nodes := make([]*scaledown.UnneededNode, len(cmd.Remove))
	var evicted []*apiv1.Pod
	for i, c := range cmd.Remove {
		n := c.Node
		for _, cur := range v.Nodes {
			if cur.Name == n.Name {
				n = cur
			}
		}
		nodes[i] = &scaledown.UnneededNode{Node: n, GroupID: c.GroupID, Since: v.Now, PodsToEvict: movable(v.PodsByNode[n.Name])}
		evicted = append(evicted, nodes[i].PodsToEvict...)
	}
	klog.InfoS("Consolidation: draining the old nodes", "command", cmd.String(), "pods", len(evicted))
	e.drainer.Drain(ctx, nodes)
	return []Outcome{{Command: cmd, Result: DrainStarted, Evicted: evicted}}
}

func (e *Executor) abort(why string) []Outcome {
	e.mu.Lock()
	cmd := e.cur.cmd
	e.cur = nil
	e.mu.Unlock()
	klog.InfoS("Consolidation: aborted before any pod moved", "command", cmd.String(), "why", why)
	return []Outcome{{Command: cmd, Result: Aborted, Reason: why}}
}

// Held returns the nodes the command in flight holds, which no other
// phase may act on: the nodes it removes and, for a Replace, the nodes
// of its replacement that came since it was asked for (nil when idle).
func (e *Executor) Held(nodes []*apiv1.Node, groupOf func(string) string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return nil
	}
	out := e.cur.cmd.NodeNames()
	if e.cur.cmd.Replacement != nil && e.cur.known != nil {
		for _, n := range nodes {
			if !e.cur.known[n.Name] && ofReplacement(n, e.cur.cmd.Replacement, groupOf) {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// ofReplacement tells a node of r: of its group, or of its size (its
// instance type label): a node pool created with its answer lost is known
// by name until a listing shows its ID, so its nodes have no group yet.
func ofReplacement(n *apiv1.Node, r *Replacement, groupOf func(string) string) bool {
	if groupOf != nil && r.Group != nil && groupOf(n.Name) == r.Group.Id() {
		return true
	}
	size := r.Template.Node().Labels[apiv1.LabelInstanceTypeStable]
	return size != "" && n.Labels[apiv1.LabelInstanceTypeStable] == size
}

// newReadyNodes counts the Ready nodes of the replacement (ofReplacement)
// that were not there when it was asked for.
func newReadyNodes(known map[string]bool, r *Replacement, v View) int {
	n := 0
	for _, node := range v.Nodes {
		if !known[node.Name] && v.Ready(node) && ofReplacement(node, r, v.GroupOf) {
			n++
		}
	}
	return n
}

// stillDisruptable says why the command's nodes may no longer be
// disrupted ("" if they may): a node or a pod marked since.
func stillDisruptable(cmd Command, v View) string {
	byName := make(map[string]*apiv1.Node, len(v.Nodes))
	for _, n := range v.Nodes {
		byName[n.Name] = n
	}
	for _, c := range cmd.Remove {
		n := byName[c.Node.Name]
		if n == nil {
			return "node " + c.Node.Name + " is gone"
		}
		if drain.NodeNotToDisrupt(n) {
			return "node " + n.Name + " is now marked not to be disrupted"
		}
		if p := notToDisrupt(v.PodsByNode[n.Name]); p != "" {
			return "pod " + p + " on " + n.Name + " is marked not to be disrupted"
		}
	}
	return ""
}

// movable drops DaemonSet and mirror pods: what the drain will evict.
func movable(pods []*apiv1.Pod) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, p := range pods {
		if isMovable(p) {
			out = append(out, p)
		}
	}
	return out
}

// isMovable tells a pod a drain evicts: not a DaemonSet's, not a mirror pod.
func isMovable(p *apiv1.Pod) bool { return !drain.IsDaemonSetPod(p) && !drain.IsMirrorPod(p) }
