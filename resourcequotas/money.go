package resourcequotas

import (
	"fmt"
	"math"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// The money limits. Cost is --max-hourly-cost, over the nodes of every
// autoscaled group; GroupCost is a node group's own limit
// (cloudprovider.HourlyCostLimiter).
const (
	Cost      Resource = "hourly-cost"
	GroupCost Resource = "node-group-hourly-cost"
)

// Quota is the account's instance quota (DigitalOcean's droplet limit):
// each node a plan adds is a new droplet.
const Quota Resource = "droplet-quota"

// costEpsilon absorbs float rounding when a spend is compared with a
// limit: $0.1 + $0.2 may fit under $0.3.
const costEpsilon = 1e-9

// Money is the spending side of the limits: the cluster-wide hourly limit
// and how nodes are priced. Spend is counted over the nodes of autoscaled
// groups only (nodes of pools the autoscaler does not manage are neither
// bought nor removed by it), at the provider's price for their size.
type Money struct {
	// MaxHourly is --max-hourly-cost in USD an hour; 0 means no limit.
	MaxHourly float64
	// price is a node's hourly price; an error when its size has none.
	price func(*apiv1.Node) (float64, error)
	// autoscaled tells a node of an autoscaled group.
	autoscaled func(*apiv1.Node) bool
}

// NewMoney returns the money limits with nodes priced by pm (nil: no
// pricing model, every price unknown) and counted when autoscaled says so.
func NewMoney(maxHourly float64, pm cloudprovider.PricingModel, autoscaled func(*apiv1.Node) bool) *Money {
	m := &Money{MaxHourly: maxHourly, autoscaled: autoscaled}
	if pm == nil {
		m.price = func(*apiv1.Node) (float64, error) {
			return 0, fmt.Errorf("the cloud provider prices no node")
		}
	} else {
		m.price = HourlyPrice(pm)
	}
	return m
}

// HourlyPrice prices a node by the hour with pm.
func HourlyPrice(pm cloudprovider.PricingModel) func(*apiv1.Node) (float64, error) {
	start := time.Unix(0, 0)
	return func(n *apiv1.Node) (float64, error) { return pm.NodePrice(n, start, start.Add(time.Hour)) }
}

// HourlyPrice is node's price an hour in USD, or why it has none.
func (m *Money) HourlyPrice(node *apiv1.Node) (float64, error) { return m.price(node) }

// moneyLimits reads the money limits from the options and the provider:
// with no pricing model they are nil unless --max-hourly-cost is set,
// when every price is unknown and nothing can be bought.
func moneyLimits(maxHourly float64, provider cloudprovider.CloudProvider) (*Money, error) {
	pm, err := provider.Pricing()
	if err != nil || pm == nil {
		if maxHourly <= 0 {
			return nil, nil
		}
		if err == nil {
			err = fmt.Errorf("no pricing model")
		}
		return NewMoney(maxHourly, nil, nil), fmt.Errorf("--max-hourly-cost is set but nodes cannot be priced, so nothing is bought: %w", err)
	}
	return NewMoney(maxHourly, pm, func(n *apiv1.Node) bool {
		g, err := provider.NodeGroupForNode(n)
		return err == nil && g != nil
	}), nil
}

// costOf adds node's hourly cost (n nodes) to t, or counts it unpriced.
func (m *Money) costOf(node *apiv1.Node, n int, t *Totals) {
	if m == nil || n == 0 {
		return
	}
	p, err := m.price(node)
	if err != nil {
		t.Unpriced += n
		return
	}
	t.HourlyCost += p * float64(n)
}

// GroupRoom returns how many of want more nodes like node the group,
// whose target is target, may add under its own hourly limit
// (cloudprovider.HourlyCostLimiter) and, when none, GroupCost. A pool has
// one size, so the limit is a bound on its node count:
// ⌊limit ÷ price⌋ − target.
func (t *Tracker) GroupRoom(group cloudprovider.NodeGroup, target int, node *apiv1.Node, want int) (int, Resource) {
	limit := groupLimit(group)
	if limit <= 0 || want <= 0 {
		return want, ""
	}
	price, err := t.nodePrice(node)
	if err != nil {
		return 0, GroupCost
	}
	if price <= 0 {
		return want, ""
	}
	left := int(math.Floor(limit/price+costEpsilon)) - target
	if left <= 0 {
		return 0, GroupCost
	}
	return min(want, left), ""
}

func groupLimit(group cloudprovider.NodeGroup) float64 {
	if l, ok := group.(cloudprovider.HourlyCostLimiter); ok && group != nil {
		return l.MaxHourlyCost()
	}
	return 0
}

func (t *Tracker) nodePrice(node *apiv1.Node) (float64, error) {
	if t.limits.Money == nil {
		return 0, fmt.Errorf("no pricing model")
	}
	return t.limits.Money.price(node)
}

// costRoom is how many of room nodes like node fit under --max-hourly-cost.
// An unknown price, of the node or of a live node, fits none: the limit
// cannot be shown to hold.
func (t *Tracker) costRoom(node *apiv1.Node, room int) (int, bool) {
	m := t.limits.Money
	if m == nil || m.MaxHourly <= 0 {
		return room, true
	}
	if t.used.Unpriced > 0 {
		return 0, false
	}
	price, err := m.price(node)
	if err != nil {
		return 0, false
	}
	if price <= 0 {
		return room, true
	}
	left := int(math.Floor((m.MaxHourly-t.used.HourlyCost)/price + costEpsilon))
	if left < room {
		return max(left, 0), left > 0
	}
	return room, true
}

// Explain renders why r stops nodes like node, with the figures, for the
// NotTriggerScaleUp events: "max hourly cost reached: $2.40/h of
// --max-hourly-cost $3.00/h in use, a node costs $0.72/h".
func (t *Tracker) Explain(r Resource, group cloudprovider.NodeGroup, target int, node *apiv1.Node) string {
	switch r {
	case Cost:
		m := t.limits.Money
		if t.used.Unpriced > 0 {
			return fmt.Sprintf("max hourly cost: %d nodes of autoscaled groups have no price (set price_overrides), so --max-hourly-cost $%.4f/h cannot be shown to hold", t.used.Unpriced, m.MaxHourly)
		}
		p, err := m.price(node)
		if err != nil {
			return fmt.Sprintf("max hourly cost: the node has no price (%v), so --max-hourly-cost $%.4f/h cannot be shown to hold", err, m.MaxHourly)
		}
		return fmt.Sprintf("max hourly cost reached: $%.4f/h of --max-hourly-cost $%.4f/h in use, a node costs $%.4f/h", t.used.HourlyCost, m.MaxHourly, p)
	case Quota:
		q := t.limits.Instances
		return fmt.Sprintf("account droplet limit reached: %d droplets of DigitalOcean's droplet_limit %d (read %s), %d planned this loop",
			q.Instances, q.Limit, q.ReadAt.UTC().Format(time.RFC3339), t.planned)
	case GroupCost:
		limit := groupLimit(group)
		p, err := t.nodePrice(node)
		if err != nil {
			return fmt.Sprintf("node group max hourly cost: the node has no price (%v), so the group's $%.4f/h cannot be shown to hold", err, limit)
		}
		return fmt.Sprintf("node group max hourly cost reached: %d nodes at $%.4f/h = $%.4f/h of the group's $%.4f/h", target, p, p*float64(target), limit)
	}
	return string(r)
}
