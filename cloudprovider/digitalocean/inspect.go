package digitalocean

import (
	"context"
	"errors"
	"time"

	"github.com/digitalocean/godo"
)

// Inspection is a read-only view of the DigitalOcean side for the preflight
// check (package preflight): it reads the cloud config as the provider does
// and asks with the provider's own client (token source, URL rules, redirect
// guard, error reduction), and classifies pools with the provider's own
// selection rules, so the check cannot disagree with what the autoscaler
// would do. It has no method that writes.
type Inspection struct {
	cfg    *providerConfig
	client *apiClient
}

// NewInspection reads and validates the cloud config at path; like the
// provider, it contacts nothing until asked. Its client gives up quickly
// (two attempts of at most 10 s, short waits): a check must answer in
// seconds, not wait out a rate limit.
func NewInspection(path string) (*Inspection, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	o := defaultClientOptions()
	o.attemptTimeout = 10 * time.Second
	o.maxAttempts = 2
	o.backoffBase = 200 * time.Millisecond
	o.backoffMax = time.Second
	o.maxWait = 2 * time.Second
	o.paceMax = time.Second
	client, err := newAPIClient(cfg, o)
	if err != nil {
		return nil, err
	}
	return &Inspection{cfg: cfg, client: client}, nil
}

// ClusterID is the cloud config's cluster_id.
func (i *Inspection) ClusterID() string { return i.cfg.clusterID }

// APIBaseURL is the API root requests go to, e.g. https://api.digitalocean.com/.
func (i *Inspection) APIBaseURL() string { return i.client.godo.BaseURL.String() }

// Selection is the node_pool_selection mode, SelectByAutoScale or SelectByTags.
func (i *Inspection) Selection() string { return i.cfg.selection }

// TokenSource says where the token comes from, for messages: the token_file
// path (when it looks like a path: see showPath) or the literal field. The
// token itself is never shown.
func (i *Inspection) TokenSource() string {
	if f, ok := i.cfg.tokenSource.(*fileTokenSource); ok {
		return "token_file " + showPath(f.path)
	}
	return "the cloud config's token field"
}

// AutoprovisioningSizes are the size patterns of the cloud config's
// autoprovisioning section; nil when the section is absent.
func (i *Inspection) AutoprovisioningSizes() []string {
	if i.cfg.autoprovisioning == nil {
		return nil
	}
	return append([]string(nil), i.cfg.autoprovisioning.sizes...)
}

// Cluster reads the cluster object (GET /v2/kubernetes/clusters/{id}).
func (i *Inspection) Cluster(ctx context.Context) (*godo.KubernetesCluster, error) {
	return i.client.getCluster(ctx)
}

// NodePools lists every pool of the cluster, every page.
func (i *Inspection) NodePools(ctx context.Context) ([]*godo.KubernetesNodePool, error) {
	return i.client.listNodePools(ctx)
}

// Sizes lists the droplet sizes (GET /v2/sizes), every page.
func (i *Inspection) Sizes(ctx context.Context) ([]godo.Size, error) {
	return i.client.listSizes(ctx)
}

// RateLimit is the token's hourly budget as the last answer gave it; known
// is false before any answer carried the headers.
func (i *Inspection) RateLimit() (limit, remaining int, known bool) {
	i.client.mu.Lock()
	defer i.client.mu.Unlock()
	return i.client.rate.limit, i.client.rate.remaining, i.client.rate.known
}

// PoolSelection is whether a pool is a node group in a selection mode, and
// why, as the provider decides at every Refresh.
type PoolSelection struct {
	NodeGroup        bool
	MinSize, MaxSize int
	// Note explains the verdict (empty for a pool selected by auto_scale);
	// Warn says it likely needs the operator's attention.
	Note string
	Warn bool
}

// SelectPool applies the provider's selection rules to one pool.
func SelectPool(mode string, p *godo.KubernetesNodePool) PoolSelection {
	v := selectPool(mode, p)
	return PoolSelection{NodeGroup: v.group, MinSize: v.minSize, MaxSize: v.maxSize, Note: v.note, Warn: v.warn}
}

// AllowsSize reports whether a size slug matches one of the
// autoprovisioning patterns; false without the section.
func (i *Inspection) AllowsSize(slug string) bool {
	return i.cfg.autoprovisioning != nil && i.cfg.autoprovisioning.allows(slug)
}

// APIErrorStatus is the HTTP status of a DigitalOcean error answer in err,
// and its request ID; 0 when no answer came (a transport error, a timeout).
func APIErrorStatus(err error) (status int, requestID string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.StatusCode, ae.RequestID
	}
	return 0, ""
}

// AutoprovisioningSizePreference is the cloud config's
// autoprovisioning.size_preference, first preferred; nil when unset.
func (i *Inspection) AutoprovisioningSizePreference() []string {
	if i.cfg.autoprovisioning == nil {
		return nil
	}
	return append([]string(nil), i.cfg.autoprovisioning.sizePreference...)
}

// Account reads GET /v2/account. DigitalOcean answers a token without
// droplet:read without droplet_limit (0 here), not with a 403.
func (i *Inspection) Account(ctx context.Context) (*godo.Account, error) {
	return i.client.getAccount(ctx)
}

// DropletCount reads the account's droplet count (GET /v2/droplets,
// per_page=1, meta.total), which needs droplet:read.
func (i *Inspection) DropletCount(ctx context.Context) (int, error) {
	return i.client.countDroplets(ctx)
}
