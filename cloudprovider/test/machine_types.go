package test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// machineType is a machine new groups may be made of, with the template of
// its nodes before the group's labels and taints are added.
type machineType struct {
	name     string
	template *framework.NodeInfo
}

// AddMachineType offers a machine type for node autoprovisioning, in the
// order GetAvailableMachineTypes lists them; template is a node of it
// (ResourceSlices included).
func (p *Provider) AddMachineType(name string, template *framework.NodeInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.machines = append(p.machines, machineType{name: name, template: template})
}

// StopCreation makes GetAvailableMachineTypes answer that node group
// creation is stopped, for why.
func (p *Provider) StopCreation(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creationStopped = why
}

// GetAvailableMachineTypes implements cloudprovider.CloudProvider: the
// machine types AddMachineType offered.
func (p *Provider) GetAvailableMachineTypes() ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.creationStopped != "" {
		return nil, fmt.Errorf("%w: %s", cloudprovider.ErrCreationStopped, p.creationStopped)
	}
	out := make([]string, len(p.machines))
	for i, m := range p.machines {
		out[i] = m.name
	}
	return out, nil
}

// NewNodeGroup implements cloudprovider.CloudProvider: a group that does
// not exist, of the machine type's template with the labels and taints
// added, as a provider puts a pool's labels and taints on its nodes. Its id
// is the machine type followed by the labels and taints.
func (p *Provider) NewNodeGroup(machine string, labels map[string]string, _ map[string]string, taints []apiv1.Taint,
	_ map[string]resource.Quantity) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.machines, func(m machineType) bool { return m.name == machine })
	if i < 0 {
		return nil, fmt.Errorf("test provider: no machine type %q", machine)
	}
	tmpl := p.machines[i].template.DeepCopy()
	node := tmpl.Node()
	maps.Copy(node.Labels, labels)
	node.Spec.Taints = append(node.Spec.Taints, taints...)
	id := []string{machine}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		id = append(id, k+"="+labels[k])
	}
	for _, t := range taints {
		id = append(id, t.ToString())
	}
	g := &NodeGroup{p: p, id: strings.Join(id, ","), max: 10, template: tmpl, errs: map[string]error{}}
	return &PlannedGroup{NodeGroup: g, Labels: maps.Clone(labels), Taints: slices.Clone(taints)}, nil
}

// PlannedGroup is a group NewNodeGroup described: it does not exist.
type PlannedGroup struct {
	*NodeGroup
	// Labels and Taints are those NewNodeGroup was asked for.
	Labels map[string]string
	Taints []apiv1.Taint
}

// Exist implements cloudprovider.NodeGroup.
func (g *PlannedGroup) Exist() bool { return false }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *PlannedGroup) Autoprovisioned() bool { return true }

// Create implements cloudprovider.NodeGroup: planning tests never create.
func (g *PlannedGroup) Create() (cloudprovider.NodeGroup, error) {
	return nil, cloudprovider.ErrNotImplemented
}
