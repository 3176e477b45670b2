package digitalocean

// Reads the preflight check (package preflight) makes beside inspect.go's:
// the size preference of pools on demand, and the account reads behind the
// droplet quota (quota.go), with the provider's own client.

import (
	"context"

	"github.com/digitalocean/godo"
)

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
