package digitalocean

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// unavailableSizes are the (size, region) pairs that cannot be had now:
// DigitalOcean refused a create or resize of the size for capacity (a 422
// that is not the droplet limit), or the size's nodes did not register
// within --max-node-provision-time. Each is held for --unavailable-size-ttl
// (Karpenter's unavailable-offerings cache keeps about 3 minutes), learnt
// per size, not per pool: no create or resize of the size is sent in the
// region meanwhile, so at most one request per pair per TTL meets the
// refusal, and the core takes another size in the same loop.
type unavailableSizes struct {
	mu    sync.Mutex
	until map[string]unavailableEntry
}

type unavailableEntry struct {
	until time.Time
	why   string
}

func sizeKey(size, region string) string { return size + "/" + region }

// markUnavailable holds size unavailable in the cluster's region until
// now + TTL.
func (m *manager) markUnavailable(size, why string) time.Time {
	m.mu.RLock()
	region := m.region
	m.mu.RUnlock()
	until := m.o.clock.Now().Add(m.unavailableTTL)
	u := &m.unavailable
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = map[string]unavailableEntry{}
	}
	u.until[sizeKey(size, region)] = unavailableEntry{until: until, why: why}
	klog.InfoS("Droplet size unavailable in the region; no request for it until the TTL ends", "size", size, "region", region,
		"until", until.UTC().Format(time.RFC3339), "why", why)
	return until
}

// sizeUnavailable says why size cannot be had in the cluster's region now
// ("" when it can): held after a refusal or a provision timeout, or listed
// by the Sizes API as not available or not offered in the region (the
// catalogue as last fetched; none fetched: not known, so available).
func (m *manager) sizeUnavailable(size string, catalog []godo.Size) (why string, until time.Time) {
	m.mu.RLock()
	region := m.region
	m.mu.RUnlock()
	now := m.o.clock.Now()
	u := &m.unavailable
	u.mu.Lock()
	e, ok := u.until[sizeKey(size, region)]
	if ok && !now.Before(e.until) {
		delete(u.until, sizeKey(size, region))
		ok = false
	}
	u.mu.Unlock()
	if ok {
		return e.why, e.until
	}
	if region == "" {
		return "", time.Time{}
	}
	for _, s := range catalog {
		if s.Slug != size {
			continue
		}
		switch {
		case !s.Available:
			return "the Sizes API lists it as not available", time.Time{}
		case len(s.Regions) > 0 && !slices.Contains(s.Regions, region):
			return "the Sizes API does not offer it in region " + region, time.Time{}
		}
	}
	return "", time.Time{}
}

// cachedCatalog is the Sizes API's list if one was fetched, without
// fetching.
func (p *pricingModel) cachedCatalog() []godo.Size {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sizes
}

// unavailableErr returns the error a write to size must not be sent for,
// nil when the size may be asked for.
func (m *manager) unavailableErr(size string) error {
	why, until := m.sizeUnavailable(size, m.pricing.cachedCatalog())
	if why == "" {
		return nil
	}
	m.mu.RLock()
	region := m.region
	m.mu.RUnlock()
	return &cloudprovider.SizeUnavailableError{Size: size, Region: region, Until: until, Message: why + " (no request sent)"}
}

// capacityRefusal turns a 422 about the size's availability into a
// SizeUnavailableError and holds the size: DigitalOcean does not document
// the body of a refusal for capacity, so a 422 whose message names the
// size or the region, or speaks of availability, capacity or stock, is
// taken as "this size here, not now" (docs/limits.md says so). The droplet
// limit's 422 and others (a name taken, a bad field) are returned as they
// are.
func (m *manager) capacityRefusal(err error, size string) error {
	var ae *apiError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnprocessableEntity {
		return err
	}
	if _, limit := cloudprovider.AsAccountLimit(err); limit || !capacityWords(ae.Message, size, m.regionSlug()) {
		return err
	}
	until := m.markUnavailable(size, fmt.Sprintf("DigitalOcean refused it: %s", ae.Message))
	m.mu.RLock()
	region := m.region
	m.mu.RUnlock()
	return &cloudprovider.SizeUnavailableError{Size: size, Region: region, Until: until, Message: ae.Message, Err: err}
}

var (
	_ cloudprovider.AvailabilityReporter    = (*NodeGroup)(nil)
	_ cloudprovider.ProvisionTimeoutLearner = (*NodeGroup)(nil)
)

// size is the group's droplet size.
func (g *NodeGroup) size() string {
	if g.planned != nil {
		return g.planned.Slug
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pool.Size
}

// Unavailable says why the group's size cannot be had now, "" when it can.
func (g *NodeGroup) Unavailable() string {
	why, until := g.m.sizeUnavailable(g.size(), g.m.pricing.cachedCatalog())
	if why == "" {
		return ""
	}
	if until.IsZero() {
		return fmt.Sprintf("size %s unavailable: %s", g.size(), why)
	}
	return fmt.Sprintf("size %s unavailable until %s: %s", g.size(), until.UTC().Format(time.RFC3339), why)
}

// NodesNeverCame holds the group's size unavailable: its nodes did not
// register within --max-node-provision-time.
func (g *NodeGroup) NodesNeverCame() {
	g.m.markUnavailable(g.size(), "its nodes did not register within --max-node-provision-time")
}

// capacityWords says whether a 422's message is about the size's
// availability: it names "size", the size slug as a word, or the region,
// or speaks of availability, capacity or stock; never the droplet limit.
// A pool name holds the slug inside a longer word ("ca-s-8vcpu-16gb-1"),
// which is not taken for it.
func capacityWords(msg, size, region string) bool {
	low := strings.ToLower(msg)
	if strings.Contains(low, "droplet limit") {
		return false
	}
	for _, w := range []string{"not available", "unavailable", "capacity", "out of stock", "insufficient"} {
		if strings.Contains(low, w) {
			return true
		}
	}
	words := strings.FieldsFunc(low, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	})
	for _, w := range words {
		if w == "size" || w == size || (region != "" && w == region) {
			return true
		}
	}
	return false
}

// regionSlug is the cluster's region as last read.
func (m *manager) regionSlug() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.region
}
