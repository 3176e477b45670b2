package digitalocean

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/digitalocean/godo"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
)

// Operation names of the account reads.
const (
	opGetAccount   = "GetAccount"
	opListDroplets = "ListDroplets"
)

// dropletQuota is the account's droplet limit and droplet count, read
// rarely (quotaTTL, after a refusal at the limit at the next Refresh) with
// GET /v2/account and GET /v2/droplets?per_page=1, both of which need
// droplet:read. Between reads the count follows the droplets of the
// cluster's pools as each Refresh lists them; droplets made elsewhere on the
// account are seen at the next read.
type dropletQuota struct {
	mu sync.Mutex
	// known: the last read succeeded.
	known bool
	// limit and droplets as read; poolDroplets: the cluster's droplets
	// in the listing of that moment.
	limit, droplets, poolDroplets int
	readAt                        time.Time
	// nextRead: not before; zero reads at the next Refresh.
	nextRead time.Time
	// why the quota is unknown, logged when it changes.
	why string
}

// getAccount reads GET /v2/account.
func (c *apiClient) getAccount(ctx context.Context) (*godo.Account, error) {
	var out *godo.Account
	err := c.call(ctx, opGetAccount, repeatable, func(ctx context.Context) (*godo.Response, error) {
		var resp *godo.Response
		var err error
		out, resp, err = c.godo.Account.Get(ctx)
		return resp, err
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%s: empty answer", opGetAccount)
	}
	return out, err
}

// countDroplets reads the account's droplet count: meta.total of a page of
// one droplet.
func (c *apiClient) countDroplets(ctx context.Context) (int, error) {
	total := -1
	err := c.call(ctx, opListDroplets, repeatable, func(ctx context.Context) (*godo.Response, error) {
		_, resp, err := c.godo.Droplets.List(ctx, &godo.ListOptions{Page: 1, PerPage: 1})
		if err == nil && resp != nil && resp.Meta != nil {
			total = resp.Meta.Total
		}
		return resp, err
	})
	if err == nil && total < 0 {
		err = fmt.Errorf("%s: the answer has no meta.total", opListDroplets)
	}
	return total, err
}

// refreshQuota reads the quota when it is due. A failure leaves it unknown
// (the 422 handling is the fallback) and is tried again after quotaTTL;
// it never fails a Refresh.
func (m *manager) refreshQuota(ctx context.Context) {
	if m.o.quotaTTL <= 0 {
		return
	}
	q := &m.quota
	now := m.o.clock.Now()
	m.mu.RLock()
	poolDroplets := m.poolDroplets
	m.mu.RUnlock()
	q.mu.Lock()
	due := !now.Before(q.nextRead)
	// At the limit by the count since the read (the cluster's own
	// droplets took what was left): read again within a minute, as when
	// the read itself found the limit reached.
	atLimit := q.known && q.droplets+poolDroplets-q.poolDroplets >= q.limit
	if atLimit && !now.Before(q.readAt.Add(min(quotaReachedTTL, m.o.quotaTTL))) {
		due = true
	}
	q.mu.Unlock()
	if !due {
		return
	}
	limit, droplets, err := m.readQuota(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextRead = now.Add(m.o.quotaTTL)
	if err != nil {
		q.known = false
		if why := err.Error(); why != q.why {
			q.why = why
			klog.InfoS("The account's droplet limit is not known; DigitalOcean's 422 at the limit backs scale-up off instead (docs/limits.md)", "err", err)
		}
		return
	}
	if !q.known || q.limit != limit {
		klog.InfoS("Read the account's droplet limit", "limit", limit, "droplets", droplets)
	}
	q.known, q.why = true, ""
	q.limit, q.droplets, q.poolDroplets, q.readAt = limit, droplets, poolDroplets, now
	if droplets >= limit {
		// At the limit: read again soon, so that droplets deleted
		// elsewhere or a raised limit are seen within a minute.
		q.nextRead = now.Add(min(quotaReachedTTL, m.o.quotaTTL))
	}
}

// quotaReachedTTL spaces the reads while the account is at its limit.
const quotaReachedTTL = time.Minute

func (m *manager) readQuota(ctx context.Context) (limit, droplets int, err error) {
	acct, err := m.client.getAccount(ctx)
	if err != nil {
		return 0, 0, err
	}
	if acct.DropletLimit <= 0 {
		return 0, 0, errors.New("GET /v2/account answered no droplet_limit: the token lacks droplet:read")
	}
	droplets, err = m.client.countDroplets(ctx)
	if err != nil {
		return 0, 0, err
	}
	return acct.DropletLimit, droplets, nil
}

// quotaRefused makes the next Refresh read the quota again: DigitalOcean
// refused droplets at the limit, so the count read may be stale.
func (m *manager) quotaRefused() {
	m.quota.mu.Lock()
	m.quota.nextRead = time.Time{}
	m.quota.mu.Unlock()
}

// dropletLimitError is asDropletLimit, which also has the quota read again
// when DigitalOcean refused at the limit.
func (m *manager) dropletLimitError(err error) error {
	err = asDropletLimit(err)
	var al *cloudprovider.AccountLimitError
	if errors.As(err, &al) {
		m.quotaRefused()
	}
	return err
}

var _ cloudprovider.InstanceQuotaReporter = (*CloudProvider)(nil)

// InstanceQuota is the account's droplet limit and what is left of it:
// the count read, corrected by the change in the cluster's droplets the
// listings have shown since.
func (p *CloudProvider) InstanceQuota() (cloudprovider.InstanceQuota, bool) {
	q := &p.m.quota
	q.mu.Lock()
	known, limit, droplets, atRead, readAt := q.known, q.limit, q.droplets, q.poolDroplets, q.readAt
	q.mu.Unlock()
	if !known {
		return cloudprovider.InstanceQuota{}, false
	}
	p.m.mu.RLock()
	now := droplets + p.m.poolDroplets - atRead
	p.m.mu.RUnlock()
	now = max(now, 0)
	return cloudprovider.InstanceQuota{Limit: limit, Instances: now, Headroom: max(limit-now, 0), ReadAt: readAt}, true
}
