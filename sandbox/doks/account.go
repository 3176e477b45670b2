package doks

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/digitalocean/godo"
)

// Operation names of the account endpoints.
const (
	OpGetAccount   = "GetAccount"
	OpListDroplets = "ListDroplets"
)

// ForbiddenMessage is DigitalOcean's answer (403 forbidden) to a token
// without the scope an endpoint needs.
const ForbiddenMessage = "You are not authorized to perform this operation"

// SetOtherDroplets sets how many droplets the account has outside the
// cluster (other clusters, plain droplets): they count toward the droplet
// limit and GET /v2/droplets lists them.
func (s *Server) SetOtherDroplets(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.otherDroplets = n
}

// SetTokenWithoutDropletRead marks token as a custom-scoped token without
// droplet:read: DigitalOcean's specification says the account's
// droplet_limit "Requires droplet:read scope", so GET /v2/account answers
// without it, and GET /v2/droplets answers 403.
func (s *Server) SetTokenWithoutDropletRead(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noDropletRead == nil {
		s.noDropletRead = map[string]bool{}
	}
	s.noDropletRead[token] = true
}

func (s *Server) dropletReadLocked(r *http.Request) bool {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return !s.noDropletRead[token]
}

// dropletsLocked counts the account's droplets: every node of every pool
// (those draining or deleting too, as DigitalOcean counts a droplet until
// it is destroyed) and the droplets outside the cluster.
func (s *Server) dropletsLocked() int {
	total := s.otherDroplets
	for _, p := range s.pools {
		total += len(p.nodes)
	}
	return total
}

// handleGetAccount answers GET /v2/account as DigitalOcean does (godo's
// Account): droplet_limit only for a token with droplet:read.
func (s *Server) handleGetAccount(w http.ResponseWriter, r *http.Request, _ string) {
	s.mu.Lock()
	acct := &godo.Account{FloatingIPLimit: 3, ReservedIPLimit: 3, VolumeLimit: 100, Email: "sandbox@example.com",
		UUID: "b6fr89dbf6d9156cace5f3c78dc9851d957381ef", EmailVerified: true, Status: "active"}
	if s.dropletReadLocked(r) {
		acct.DropletLimit = s.dropletLimit
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Account *godo.Account `json:"account"`
	}{acct})
}

// handleListDroplets answers GET /v2/droplets (droplet:read), paged, with
// meta.total the account's droplet count: a page of one tells the count.
func (s *Server) handleListDroplets(w http.ResponseWriter, r *http.Request, reqID string) {
	s.mu.Lock()
	if !s.dropletReadLocked(r) {
		s.mu.Unlock()
		writeError(w, http.StatusForbidden, "forbidden", ForbiddenMessage, reqID)
		return
	}
	type row struct {
		id   int
		name string
	}
	var all []row
	for _, p := range s.pools {
		for _, n := range p.nodes {
			id, _ := strconv.Atoi(n.DropletID)
			all = append(all, row{id, n.Name})
		}
	}
	for i := range s.otherDroplets {
		all = append(all, row{300000000 + i, "other-" + strconv.Itoa(i)})
	}
	s.mu.Unlock()
	page, perPage := paging(r)
	lo, hi, links := pageBounds(r, len(all), page, perPage)
	out := make([]godo.Droplet, 0, hi-lo)
	for _, d := range all[lo:hi] {
		out = append(out, godo.Droplet{ID: d.id, Name: d.name, Status: "active"})
	}
	writeJSON(w, http.StatusOK, struct {
		Droplets []godo.Droplet `json:"droplets"`
		Links    apiLinks       `json:"links"`
		Meta     apiMeta        `json:"meta"`
	}{out, links, apiMeta{Total: len(all)}})
}
