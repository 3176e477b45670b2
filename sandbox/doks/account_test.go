package doks

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
)

// GET /v2/account and GET /v2/droplets answer as DigitalOcean does, read by
// godo itself: the droplet limit, and the account's droplets (the cluster's
// nodes and those outside it) as meta.total of a one-droplet page; a create
// past the limit is refused with DigitalOcean's 422.
func TestAccountDropletLimitAndCount(t *testing.T) {
	s, c, hs := newTestServer(t, Options{DropletLimit: 5})
	ctx := context.Background()
	pool := mustPool(t, s, PoolSpec{Name: "a", Size: "s-2vcpu-4gb", Count: 2})
	s.SetOtherDroplets(2)

	acct, _, err := c.Account.Get(ctx)
	if err != nil || acct.DropletLimit != 5 {
		t.Fatalf("account = %+v, %v; want droplet_limit 5", acct, err)
	}
	droplets, resp, err := c.Droplets.List(ctx, &godo.ListOptions{PerPage: 1})
	if err != nil || len(droplets) != 1 || resp.Meta == nil || resp.Meta.Total != 4 {
		t.Fatalf("droplets %v, meta %+v, err %v; want one droplet and total 4", droplets, resp.Meta, err)
	}
	two := 3
	_, _, err = c.Kubernetes.UpdateNodePool(ctx, testCluster, pool.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &two})
	if err != nil {
		t.Fatalf("a resize to the limit: %v", err)
	}
	four := 4
	_, _, err = c.Kubernetes.UpdateNodePool(ctx, testCluster, pool.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &four})
	var ae *godo.ErrorResponse
	if !errors.As(err, &ae) || ae.Response.StatusCode != http.StatusUnprocessableEntity || ae.Message != DropletLimitMessage {
		t.Fatalf("a resize past the limit: %v, want 422 %q", err, DropletLimitMessage)
	}
	_, _, err = c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "b", Size: "s-2vcpu-4gb", Count: 1})
	if !errors.As(err, &ae) || ae.Response.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a create past the limit: %v, want 422", err)
	}

	// A token without droplet:read: no droplet_limit, and no droplet list.
	const scoped = "token-without-droplet-read"
	s.SetTokens(testToken, scoped)
	s.SetTokenWithoutDropletRead(scoped)
	narrow, err := godo.New(oauth2.NewClient(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: scoped})), godo.SetBaseURL(hs.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	acct, _, err = narrow.Account.Get(ctx)
	if err != nil || acct.DropletLimit != 0 {
		t.Fatalf("account without droplet:read = %+v, %v; want no droplet_limit", acct, err)
	}
	_, _, err = narrow.Droplets.List(ctx, &godo.ListOptions{PerPage: 1})
	if !errors.As(err, &ae) || ae.Response.StatusCode != http.StatusForbidden {
		t.Fatalf("droplets without droplet:read: %v, want 403", err)
	}
}
