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
	out := make([]string, 0, len(p.machines))
	for _, m := range p.machines {
		if !p.unavailable[m.name] {
			out = append(out, m.name)
		}
	}
	return out, nil
}

// ListMachineTypesByPreference makes the machine types' order the
// operator's preference (cloudprovider.MachineTypeOrderer).
func (p *Provider) ListMachineTypesByPreference() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byPreference = true
}

// MachineTypesByPreference implements cloudprovider.MachineTypeOrderer.
func (p *Provider) MachineTypesByPreference() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byPreference
}

// AllowCreation lets planned groups be created (CreateWithSize).
func (p *Provider) AllowCreation() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates = true
}

// OutOfStock makes creating a group of the machine type fail with a
// cloudprovider.SizeUnavailableError, after which GetAvailableMachineTypes
// no longer lists it, as a provider holding the size unavailable does.
func (p *Provider) OutOfStock(machine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outOfStock == nil {
		p.outOfStock = map[string]bool{}
	}
	p.outOfStock[machine] = true
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
	return &PlannedGroup{NodeGroup: g, Labels: maps.Clone(labels), Taints: slices.Clone(taints), machine: machine}, nil
}

// PlannedGroup is a group NewNodeGroup described: it does not exist.
type PlannedGroup struct {
	*NodeGroup
	// Labels and Taints are those NewNodeGroup was asked for.
	Labels map[string]string
	Taints []apiv1.Taint
	// machine is the machine type.
	machine string
}

// CreateWithSize implements cloudprovider.SizedCreator: a machine type out
// of stock (OutOfStock) is refused for capacity and held unavailable;
// otherwise, after AllowCreation, the group is made with count nodes asked
// for, and without it creation is refused (ErrNotImplemented), as planning
// tests expect.
func (g *PlannedGroup) CreateWithSize(count int) (cloudprovider.NodeGroup, error) {
	p := g.p
	p.mu.Lock()
	p.record(Call{Method: "CreateWithSize", Group: g.id, Delta: count})
	if p.outOfStock[g.machine] {
		if p.unavailable == nil {
			p.unavailable = map[string]bool{}
		}
		p.unavailable[g.machine] = true
		p.mu.Unlock()
		return nil, &cloudprovider.SizeUnavailableError{Size: g.machine, Region: "test", Message: "out of stock"}
	}
	creates := p.creates
	p.mu.Unlock()
	if !creates {
		return nil, cloudprovider.ErrNotImplemented
	}
	made := p.AddNodeGroup("created-"+g.id, 0, g.max, 0, g.template)
	if err := made.IncreaseSize(count); err != nil {
		return nil, err
	}
	return made, nil
}

// Exist implements cloudprovider.NodeGroup.
func (g *PlannedGroup) Exist() bool { return false }

// Autoprovisioned implements cloudprovider.NodeGroup.
func (g *PlannedGroup) Autoprovisioned() bool { return true }

// Create implements cloudprovider.NodeGroup: planning tests never create.
func (g *PlannedGroup) Create() (cloudprovider.NodeGroup, error) {
	return nil, cloudprovider.ErrNotImplemented
}
