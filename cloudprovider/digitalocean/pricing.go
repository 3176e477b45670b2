package digitalocean

import (
	"fmt"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/framework"
)

// podPriceReferenceSize is the size whose price per vCPU and per GiB prices
// pods. Pricing a pod the same wherever it lands lets the price expander
// compare node groups by what their nodes cost for the pods they take; a
// small general-purpose size is what most DOKS pods would otherwise run on.
const podPriceReferenceSize = "s-2vcpu-4gb"

// pricesRetryInterval spaces the attempts while no price list has been
// fetched yet: the price expander asks for prices several times a loop, and
// an unavailable Sizes API must not cost a request each time.
const pricesRetryInterval = time.Minute

type sizePrice struct {
	hourly   float64
	vcpus    int
	memoryMB int
}

// pricingModel prices nodes from DigitalOcean's Sizes API, with the cloud
// config's price_overrides in place of its prices. The list is
// fetched on first use (not at start-up nor in Refresh, so a Refresh stays
// one request) and again after pricesTTL; if a later fetch fails, the old
// list is kept.
type pricingModel struct {
	m *manager

	mu        sync.Mutex
	prices    map[string]sizePrice
	sizes     []godo.Size
	fetchedAt time.Time
	// firstErr and retryAt: the failure of the first fetch, returned again
	// until retryAt.
	firstErr error
	retryAt  time.Time
}

var _ cloudprovider.PricingModel = (*pricingModel)(nil)

func (p *pricingModel) lookup(slug string) (sizePrice, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.loadLocked(); err != nil {
		// A price override needs no catalogue (a token without
		// sizes:read, or the Sizes API down).
		if v, ok := p.m.priceOverrides[slug]; ok {
			return sizePrice{hourly: v}, nil
		}
		return sizePrice{}, err
	}
	sp, ok := p.prices[slug]
	if !ok {
		return sizePrice{}, fmt.Errorf("no price for DigitalOcean size %q: the Sizes API does not list it; give it in the cloud config's price_overrides", slug)
	}
	return sp, nil
}

// catalog returns the Sizes API's list, fetched as prices are.
func (p *pricingModel) catalog() ([]godo.Size, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.loadLocked(); err != nil {
		return nil, err
	}
	return p.sizes, nil
}

// loadLocked fetches the size list when there is none yet or it is older
// than pricesTTL.
func (p *pricingModel) loadLocked() error {
	now := p.m.o.clock.Now()
	if p.prices == nil && now.Before(p.retryAt) {
		return p.firstErr
	}
	if p.prices != nil && now.Sub(p.fetchedAt) < p.m.o.pricesTTL {
		return nil
	}
	sizes, err := p.m.client.listSizes(p.m.ctx)
	switch {
	case err != nil && p.prices == nil:
		p.firstErr = fmt.Errorf("fetching DigitalOcean size prices (next attempt in %s): %w", pricesRetryInterval, err)
		p.retryAt = now.Add(pricesRetryInterval)
		return p.firstErr
	case err != nil:
		klog.InfoS("Refreshing DigitalOcean size prices failed; keeping the last list", "fetchedAt", p.fetchedAt.Format(time.RFC3339), "err", err)
		p.fetchedAt = now // try again after another TTL, not on every call
	default:
		sizes, prices := withOverrides(sizes, p.m.priceOverrides)
		p.prices, p.sizes, p.fetchedAt = prices, sizes, now
		klog.V(2).InfoS("Fetched DigitalOcean size prices", "sizes", len(prices))
	}
	return nil
}

// nodeSize is the node's size slug: its instance-type label, else the size
// of the pool holding it.
func (p *pricingModel) nodeSize(node *apiv1.Node) (string, error) {
	for _, l := range []string{apiv1.LabelInstanceTypeStable, apiv1.LabelInstanceType} {
		if s := node.Labels[l]; s != "" {
			return s, nil
		}
	}
	if s, ok := p.m.instanceSize(node.Spec.ProviderID); ok && s != "" {
		return s, nil
	}
	return "", fmt.Errorf("node %s: size unknown (no %s label and not in any node pool)", node.Name, apiv1.LabelInstanceTypeStable)
}

func hours(start, end time.Time) float64 {
	if end.Before(start) {
		return 0
	}
	return end.Sub(start).Hours()
}

// NodePrice is the size's hourly price times the hours in [start, end].
func (p *pricingModel) NodePrice(node *apiv1.Node, start, end time.Time) (float64, error) {
	slug, err := p.nodeSize(node)
	if err != nil {
		return 0, err
	}
	sp, err := p.lookup(slug)
	if err != nil {
		return 0, err
	}
	return sp.hourly * hours(start, end), nil
}

// PodPrice is the pod's share of a reference node's price: the larger of
// its CPU share and its memory share of podPriceReferenceSize, times that
// size's hourly price, times the hours.
func (p *pricingModel) PodPrice(pod *apiv1.Pod, start, end time.Time) (float64, error) {
	ref, err := p.lookup(podPriceReferenceSize)
	if err != nil {
		return 0, err
	}
	if ref.vcpus <= 0 || ref.memoryMB <= 0 {
		return 0, fmt.Errorf("reference size %s has no vcpus or memory", podPriceReferenceSize)
	}
	req := framework.PodRequests(pod)
	cpuShare := float64(req.Cpu().MilliValue()) / float64(ref.vcpus*1000)
	memShare := float64(req.Memory().Value()) / float64(int64(ref.memoryMB)<<20)
	return max(cpuShare, memShare) * ref.hourly * hours(start, end), nil
}
