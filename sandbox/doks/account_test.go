package doks

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

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

// A size out of stock is refused (422) for creates and resizes that need
// new droplets of it, while the Sizes API still lists it; one the Sizes API
// lists as not available is refused as well; a shrink is never refused.
func TestSizeOutOfStock(t *testing.T) {
	s, c, _ := newTestServer(t, Options{})
	ctx := context.Background()
	pool := mustPool(t, s, PoolSpec{Name: "g", Size: "gpu-h100x1-80gb", Count: 1})
	s.SetOutOfStock("gpu-h100x1-80gb", time.Hour)
	two := 2
	_, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, pool.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &two})
	var ae *godo.ErrorResponse
	if !errors.As(err, &ae) || ae.Response.StatusCode != http.StatusUnprocessableEntity || ae.Message != SizeUnavailableMessage {
		t.Fatalf("resize of a size out of stock: %v, want 422 %q", err, SizeUnavailableMessage)
	}
	one := 1
	_, _, err = c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "h", Size: "gpu-h100x1-80gb", Count: one})
	if !errors.As(err, &ae) || ae.Response.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("create of a size out of stock: %v, want 422", err)
	}
	zero := 0
	if _, _, err := c.Kubernetes.UpdateNodePool(ctx, testCluster, pool.ID, &godo.KubernetesNodePoolUpdateRequest{Count: &zero}); err != nil {
		t.Fatalf("a shrink: %v", err)
	}
	if n := s.StockRefusals("gpu-h100x1-80gb"); n != 2 {
		t.Fatalf("%d refusals counted, want 2", n)
	}
	sizes, _, _ := c.Sizes.List(ctx, &godo.ListOptions{PerPage: 200})
	for _, sz := range sizes {
		if sz.Slug == "gpu-h100x1-80gb" && !sz.Available {
			t.Fatal("the Sizes API lists the size out of stock as not available: it should lag")
		}
	}
	s.SetOutOfStock("gpu-h100x1-80gb", 0)
	s.SetSizeAvailable("gpu-l40sx1-48gb", false)
	sizes, _, _ = c.Sizes.List(ctx, &godo.ListOptions{PerPage: 200})
	for _, sz := range sizes {
		if sz.Slug == "gpu-l40sx1-48gb" && sz.Available {
			t.Fatal("gpu-l40sx1-48gb listed available after SetSizeAvailable(false)")
		}
	}
	if _, _, err := c.Kubernetes.CreateNodePool(ctx, testCluster, &godo.KubernetesNodePoolCreateRequest{Name: "h", Size: "gpu-h100x1-80gb", Count: one}); err != nil {
		t.Fatalf("create back in stock: %v", err)
	}
}
