// Package digitalocean is the DigitalOcean Kubernetes (DOKS) cloud provider:
// selected node pools (those with auto_scale on, or with the autoscaler's
// tags) become node groups, resized through the DOKS API.
package digitalocean

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

// ProviderName is the --cloud-provider value.
const ProviderName = "digitalocean"

// CloudProvider implements cloudprovider.CloudProvider for DOKS.
type CloudProvider struct {
	m        *manager
	limiter  *cloudprovider.ResourceLimiter
	gpuLabel string
	pricing  *pricingModel
}

var (
	_ cloudprovider.CloudProvider             = (*CloudProvider)(nil)
	_ cloudprovider.DeletingInstancesReporter = (*CloudProvider)(nil)
)

// BuildDigitalOcean builds the provider from opts.CloudConfig. The config is
// read and validated first, without any network contact, so a mistake stops
// the process at start-up with a message naming it.
func BuildDigitalOcean(opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error) {
	return BuilderObservedBy(nil)(opts, rl)
}

// BuilderObservedBy returns a builder like BuildDigitalOcean whose provider
// reports every DigitalOcean request attempt to o (nil: to nobody).
func BuilderObservedBy(o CallObserver) func(config.AutoscalingOptions, *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error) {
	return func(opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error) {
		cfg, err := loadConfig(opts.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("digitalocean: %w", err)
		}
		co := defaultClientOptions()
		co.observer = o
		return newCloudProvider(cfg, opts, rl, co)
	}
}

func newCloudProvider(cfg *providerConfig, opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter, o clientOptions) (*CloudProvider, error) {
	client, err := newAPIClient(cfg, o)
	if err != nil {
		return nil, err
	}
	gpuLabel := opts.GPULabel
	if gpuLabel == "" {
		gpuLabel = DefaultGPULabel
	}
	if rl == nil {
		rl = cloudprovider.NewResourceLimiter(nil, nil)
	}
	m := newManager(client, o, gpuLabel, cfg.selection)
	m.flagsGiven = opts.FlagsGiven
	m.priceOverrides = cfg.priceOverrides
	m.provisionTimes = cfg.provisionTimes
	if opts.InitialNodeGroupBackoffDuration > 0 {
		m.createPause = opts.InitialNodeGroupBackoffDuration
	}
	switch {
	case opts.NodeAutoprovisioningEnabled && cfg.autoprovisioning == nil:
		return nil, errors.New("digitalocean: --node-autoprovisioning-enabled is set but the cloud config has no autoprovisioning section: name the sizes pools may be created with in autoprovisioning.sizes")
	case opts.NodeAutoprovisioningEnabled:
		m.autoprovisioning = cfg.autoprovisioning
		klog.InfoS("Node autoprovisioning on: node pools may be created", "sizes", cfg.autoprovisioning.sizes,
			"maxNodesPerPool", cfg.autoprovisioning.maxNodesPerPool, "namePrefix", cfg.autoprovisioning.namePrefix,
			"maxPools", opts.MaxAutoprovisionedNodeGroupCount)
	case cfg.autoprovisioning != nil:
		klog.InfoS("The cloud config's autoprovisioning section is ignored: --node-autoprovisioning-enabled is off")
	}
	endpoint := cfg.baseURL
	if endpoint == "" {
		endpoint = client.godo.BaseURL.String()
	}
	klog.InfoS("DigitalOcean provider", "cluster", cfg.clusterID, "apiBaseURL", endpoint,
		"userAgent", userAgent(), "gpuLabel", gpuLabel, "nodePoolSelection", m.selection, "selectionRule", selectionRule(m.selection))
	m.unavailableTTL = opts.UnavailableSizeTTL
	m.pricing = &pricingModel{m: m}
	return &CloudProvider{m: m, limiter: rl, gpuLabel: gpuLabel, pricing: m.pricing}, nil
}

// Name returns "digitalocean".
func (p *CloudProvider) Name() string { return ProviderName }

// NodeGroups returns the selected node pools.
func (p *CloudProvider) NodeGroups() []cloudprovider.NodeGroup {
	groups := p.m.nodeGroups()
	out := make([]cloudprovider.NodeGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	return out
}

// NodeGroupForNode looks the node up by provider ID (digitalocean://<droplet
// ID>), falling back to its DOKS node-id label. Nodes of other clouds, of
// pools without autoscaling, or unknown ones get a nil group and no error.
func (p *CloudProvider) NodeGroupForNode(node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	pid := node.Spec.ProviderID
	if pid != "" && !strings.HasPrefix(pid, providerIDPrefix) {
		return nil, nil
	}
	if g := p.m.groupForInstance(pid, node.Labels[LabelNodeID]); g != nil {
		return g, nil
	}
	return nil, nil
}

// HasInstance reports whether any node pool, autoscaled or not, still has
// the node's droplet.
func (p *CloudProvider) HasInstance(node *apiv1.Node) (bool, error) {
	pid := node.Spec.ProviderID
	if !strings.HasPrefix(pid, providerIDPrefix) {
		return false, fmt.Errorf("node %s has no DigitalOcean provider ID (%q)", node.Name, pid)
	}
	p.m.mu.RLock()
	refreshed := p.m.refreshed
	p.m.mu.RUnlock()
	if !refreshed {
		return false, errors.New("node pools not listed yet: Refresh has not succeeded")
	}
	_, ok := p.m.instanceSize(pid)
	return ok, nil
}

// DeletingInstances are the provider IDs of the nodes DOKS lists as
// draining or deleting in any pool, node group or not: a pool being
// deleted is no node group, yet its nodes keep the autoscaler's taint
// until they are gone (cloudprovider.DeletingInstancesReporter).
func (p *CloudProvider) DeletingInstances() map[string]bool {
	p.m.mu.RLock()
	defer p.m.mu.RUnlock()
	return maps.Clone(p.m.deletingInstances)
}

// Pricing prices nodes and pods from the Sizes API.
func (p *CloudProvider) Pricing() (cloudprovider.PricingModel, error) { return p.pricing, nil }

// GetResourceLimiter returns the cluster-wide limits from the flags.
func (p *CloudProvider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// GPULabel is --gpu-label, by default doks.digitalocean.com/gpu-brand.
func (p *CloudProvider) GPULabel() string { return p.gpuLabel }

// GetAvailableGPUTypes lists the GPU brands DOKS offers and the models of
// the current GPU pools' templates.
func (p *CloudProvider) GetAvailableGPUTypes() map[string]struct{} {
	out := map[string]struct{}{"nvidia": {}, "amd": {}}
	for _, g := range p.m.nodeGroups() {
		if g.template != nil && g.template.template != nil && g.template.template.Gpu != nil {
			if model := g.template.template.Gpu.Model; model != "" {
				out[model] = struct{}{}
			}
		}
	}
	return out
}

// GetNodeGpuConfig describes a GPU node: one carrying the configured GPU
// label, DOKS's gpu-brand label or upstream's gpu-node label, or
// advertising a GPU resource. Nil for other nodes.
func (p *CloudProvider) GetNodeGpuConfig(node *apiv1.Node) *cloudprovider.GpuConfig {
	var label, value string
	for _, l := range []string{p.gpuLabel, LabelGPUBrand, LabelGPUNodeUpstream} {
		if v, ok := node.Labels[l]; ok {
			label, value = l, v
			break
		}
	}
	resName, _ := gpu.In(node.Status.Capacity)
	if label == "" && resName == "" {
		return nil
	}
	if resName == "" {
		brand := node.Labels[LabelGPUBrand]
		if brand == "" {
			brand = value
		}
		resName = gpuResourceForVendor(brand)
	}
	if label == "" {
		label = p.gpuLabel
		if resName == gpu.ResourceAMDGPU {
			value = "amd"
		} else {
			value = "nvidia"
		}
	}
	return &cloudprovider.GpuConfig{Label: label, Type: value, ExtendedResourceName: resName}
}

// Problems implements cloudprovider.ProblemReporter: what the last Refresh
// found that only the operator can fix (a token without tag:read in tags
// mode).
func (p *CloudProvider) Problems() []string { return p.m.Problems() }

// Cleanup ends every DigitalOcean call in flight, a retry wait included,
// and makes later ones fail at once: shutdown calls it when the grace for
// work in flight is over, so no call outlives the process's grace period.
// Calling it again is harmless.
func (p *CloudProvider) Cleanup() error {
	klog.V(2).InfoS("DigitalOcean provider: cleanup, cancelling DigitalOcean calls")
	p.m.stop()
	return nil
}

// Refresh lists the node pools; see manager.Refresh.
func (p *CloudProvider) Refresh() error {
	if err := p.m.Refresh(p.m.ctx); err != nil {
		return err
	}
	p.m.refreshQuota(p.m.ctx)
	return nil
}
