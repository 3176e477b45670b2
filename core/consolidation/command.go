// Package consolidation keeps the cluster on the cheapest nodes that hold
// its pods (docs/consolidation.md). It is split as the other capabilities:
//   - Candidates and Plan decide, as pure functions of the cluster
//     snapshot, the nodes' groups and their prices: delete nodes whose pods
//     fit elsewhere, or replace nodes by one cheaper node, validated by the
//     removal simulation scale-down uses;
//   - Stabilizer holds a command back until it has been proposed unchanged
//     for the stabilization window;
//   - Executor carries a command out make-before-break across loop
//     iterations: the replacement first, through scale-up's executor; then,
//     once it is Ready and the command still holds, the drain and deletion
//     of the old nodes through scale-down's actuator. It returns outcomes;
//     core/report records them.
package consolidation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// Kind is what a command does.
type Kind string

const (
	// Delete removes nodes whose pods fit on the others.
	Delete Kind = "delete"
	// Replace adds cheaper nodes, then removes the old ones.
	Replace Kind = "replace"
)

// Candidate is a node consolidation may remove.
type Candidate struct {
	Node    *apiv1.Node
	GroupID string
	// Price is the node's hourly price in USD.
	Price float64
	// Pods counts the pods that would have to move (for ordering; the
	// simulation decides where they go), Moving lists them (the drain
	// evicts them; the cost model prices them).
	Pods   int
	Moving []*apiv1.Pod
	// UnneededTime is its group's --scale-down-unneeded-time: the least
	// a delete of it waits (Stabilizer.Window).
	UnneededTime time.Duration
}

// Replacement is a kind of node a command may add: a node group, existing
// or not yet (node autoprovisioning), and the node it makes.
type Replacement struct {
	Group cloudprovider.NodeGroup
	// Template is the node the group adds (sanitized: DaemonSet pods
	// included).
	Template *framework.NodeInfo
	// Size names it for people (the droplet size slug).
	Size string
	// Price is the hourly price in USD of one node.
	Price float64
	// Room is how many nodes the group may still add.
	Room int
}

// Command is one consolidation: remove nodes, adding Count nodes of
// Replacement first (Replace).
type Command struct {
	Kind        Kind
	Remove      []Candidate
	Replacement *Replacement
	Count       int
	// RemovedPrice is the hourly price of the nodes removed; Saving what
	// the cluster costs less per hour once the command is done.
	RemovedPrice, Saving float64
	// Appraisal weighs the saving against the disruption (CostModel).
	Appraisal Appraisal
}

// Key identifies a command across loops: the same kind on the same nodes
// with the same replacement size is the same command.
func (c Command) Key() string {
	names := c.NodeNames()
	slices.Sort(names)
	k := string(c.Kind) + ":" + strings.Join(names, ",")
	if c.Replacement != nil {
		k += fmt.Sprintf("->%dx%s", c.Count, c.Replacement.Size)
	}
	return k
}

// NodeNames lists the names of the nodes removed.
func (c Command) NodeNames() []string {
	out := make([]string, len(c.Remove))
	for i, r := range c.Remove {
		out[i] = r.Node.Name
	}
	return out
}

// String describes the command for logs, events and status.
func (c Command) String() string {
	s := fmt.Sprintf("%s %d node(s) (%s)", c.Kind, len(c.Remove), strings.Join(c.NodeNames(), ", "))
	if c.Replacement != nil {
		s += fmt.Sprintf(" by %d %s", c.Count, c.Replacement.Size)
	}
	s += fmt.Sprintf(", saving $%.4f/h of $%.4f/h", c.Saving, c.RemovedPrice)
	if c.Appraisal.Horizon > 0 {
		s += ": " + c.Appraisal.String()
	}
	return s
}
