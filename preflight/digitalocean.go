package preflight

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/digitalocean/godo"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// Scopes of a custom-scoped DigitalOcean token, as DigitalOcean's API
// reference names them.
const (
	scopeKubernetesRead   = "kubernetes:read"
	scopeKubernetesUpdate = "kubernetes:update"
	scopeTagRead          = "tag:read"
	scopeTagCreate        = "tag:create"
	scopeSizesRead        = "sizes:read"
	scopeDropletRead      = "droplet:read"
	scopeAccountRead      = "account:read"
)

const (
	docSelection = "docs/digitalocean.md#node-pools-which-ones-are-node-groups"
	docMigration = "docs/migration.md"
)

// needs says which DigitalOcean scopes and answers the enabled features use.
type needs struct {
	tags []string // features that read pools' tags
	// tagsBlock: without tags one of them cannot work at all (tags mode
	// selects nothing, created pools would not be recognised); otherwise
	// (consolidation's opt-in tag) a part of a feature is lost.
	tagsBlock bool
	sizes     []string // features that read the Sizes API
}

func featureNeeds(o config.AutoscalingOptions, selection string) needs {
	var n needs
	if selection == digitalocean.SelectByTags {
		n.tags = append(n.tags, "node_pool_selection=tags")
		n.tagsBlock = true
	}
	if o.NodeAutoprovisioningEnabled {
		n.tags = append(n.tags, "--node-autoprovisioning-enabled (recognising the pools it created)")
		n.tagsBlock = true
		n.sizes = append(n.sizes, "--node-autoprovisioning-enabled")
	}
	if o.Consolidation.Enabled {
		n.tags = append(n.tags, "--consolidation-enabled (the "+digitalocean.TagConsolidate+" tag)")
		n.sizes = append(n.sizes, "--consolidation-enabled (prices)")
	}
	if slices.Contains(o.ExpanderNames, "price") {
		n.sizes = append(n.sizes, "--expander=price")
	}
	return n
}

// tokenFix is the fix for a refused token or a missing scope.
func tokenFix(from string) string {
	return fmt.Sprintf("create a DigitalOcean API token (Control Panel, API, Tokens) with the scopes %s, %s, %s, %s and %s (or full access), and put it in %s",
		scopeKubernetesRead, scopeKubernetesUpdate, scopeTagRead, scopeTagCreate, scopeSizesRead, from)
}

func checkDigitalOcean(ctx context.Context, o config.AutoscalingOptions) Report {
	var r Report
	if o.CloudProviderName != digitalocean.ProviderName {
		return Report{{Check: "cloud-provider", Verdict: Fail, Detail: fmt.Sprintf("--cloud-provider=%s: this build checks only %s", o.CloudProviderName, digitalocean.ProviderName),
			Fix: "--cloud-provider=digitalocean"}}
	}
	in, err := digitalocean.NewInspection(o.CloudConfig)
	if err != nil {
		// The provider's messages name the field and never echo a token.
		return Report{{Check: "cloud-config", Verdict: Fail, Detail: err.Error(),
			Fix: "correct the cloud config (README.md, Cloud config); the autoscaler refuses to start with it as it is"}}
	}
	if o.NodeAutoprovisioningEnabled && in.AutoprovisioningSizes() == nil {
		r = append(r, Result{Check: "cloud-config", Verdict: Fail, Detail: o.CloudConfig + ": --node-autoprovisioning-enabled is set but the cloud config has no autoprovisioning section: the autoscaler refuses to start",
			Fix: "name the sizes pools may be created with in autoprovisioning.sizes (docs/autoprovisioning.md#configuration), or drop the flag"})
	} else {
		r = append(r, Result{Check: "cloud-config", Verdict: OK, Detail: fmt.Sprintf("%s: cluster_id %s, API %s, node_pool_selection %s",
			o.CloudConfig, in.ClusterID(), in.APIBaseURL(), in.Selection())})
	}
	from := in.TokenSource()
	n := featureNeeds(o, in.Selection())

	cluster, err := in.Cluster(ctx)
	if err != nil {
		return append(r, clusterError(in, err, from)...)
	}
	r = append(r, Result{Check: "do-api", Verdict: OK, Detail: "reached " + in.APIBaseURL()})
	token := Result{Check: "do-token", Verdict: OK, Detail: "DigitalOcean accepted the token from " + from}
	if limit, remaining, ok := in.RateLimit(); ok {
		token.Detail += fmt.Sprintf("; %d of its %d requests this hour remain", remaining, limit)
		if limit > 0 && remaining*10 < limit {
			token.Verdict = Warn
			token.Fix = "something else spends this token's budget (Terraform, CI, the cloud controller manager): give the autoscaler a token of its own"
		}
	}
	r = append(r, token)
	r = append(r, describeCluster(cluster))

	pools, err := in.NodePools(ctx)
	if err != nil {
		status, _ := digitalocean.APIErrorStatus(err)
		res := Result{Check: "do-scope-kubernetes-read", Verdict: Fail, Detail: "listing the cluster's node pools failed: " + err.Error()}
		if status == http.StatusForbidden {
			res.Fix = tokenFix(from)
		}
		return append(r, res)
	}
	r = append(r, Result{Check: "do-scope-kubernetes-read", Verdict: OK, Detail: fmt.Sprintf("read the cluster and its %d node pools", len(pools))})
	r = append(r, tagScope(pools, n, from))
	writes := Result{Check: "do-scope-writes", Verdict: Warn,
		Detail: writeScopes(o) + "; a read-only check cannot prove a token has them (DigitalOcean answers 403 at the first write if not)",
		Fix:    "make sure the token has " + scopeKubernetesUpdate + " (and " + scopeTagCreate + " with node autoprovisioning), or is a full-access token"}
	if o.Shadow {
		writes = Result{Check: "do-scope-writes", Verdict: OK,
			Detail: "not used in shadow mode (--shadow sends no DigitalOcean write); once it acts, " + writeScopes(o)}
	}
	r = append(r, writes)
	r = append(r, dropletReadScope(ctx, in, from))
	r = append(r, checkPools(in.Selection(), pools, o.NodeAutoprovisioningEnabled, o.Shadow)...)

	sizes, err := in.Sizes(ctx)
	r = append(r, sizesScope(sizes, err, n, from))
	if err == nil {
		r = append(r, checkAutoprovisioningSizes(in, cluster.RegionSlug, sizes, o.NodeAutoprovisioningEnabled)...)
		r = append(r, checkSizePreference(in.AutoprovisioningSizePreference(), cluster.RegionSlug, sizes, o.NodeAutoprovisioningEnabled)...)
		if len(n.sizes) > 0 {
			r = append(r, checkPrices(in.Selection(), pools, sizes))
		}
	}
	return r
}

// clusterError explains a failed read of the cluster object: the API
// unreachable, the token refused, the scope missing, the cluster not found.
func clusterError(in *digitalocean.Inspection, err error, from string) Report {
	status, reqID := digitalocean.APIErrorStatus(err)
	req := ""
	if reqID != "" {
		req = ", request " + reqID
	}
	switch {
	case status == 0:
		return Report{{Check: "do-api", Verdict: Fail, Detail: fmt.Sprintf("cannot reach the DigitalOcean API at %s: %v", in.APIBaseURL(), err),
			Fix: "check the cloud config's url, and that this pod or machine may reach that host (DNS, egress network policies, proxy)"}}
	case status == http.StatusUnauthorized:
		return Report{{Check: "do-api", Verdict: OK, Detail: "reached " + in.APIBaseURL()},
			{Check: "do-token", Verdict: Fail, Detail: fmt.Sprintf("DigitalOcean refused the token from %s (401 Unauthorized%s): it is wrong, expired or revoked", from, req),
				Fix: tokenFix(from)}}
	case status == http.StatusForbidden:
		return Report{{Check: "do-api", Verdict: OK, Detail: "reached " + in.APIBaseURL()},
			{Check: "do-token", Verdict: OK, Detail: "DigitalOcean accepted the token from " + from},
			{Check: "do-scope-kubernetes-read", Verdict: Fail, Detail: fmt.Sprintf("reading cluster %s was forbidden (403%s): the token lacks %s", in.ClusterID(), req, scopeKubernetesRead),
				Fix: tokenFix(from)}}
	case status == http.StatusNotFound:
		return Report{{Check: "do-api", Verdict: OK, Detail: "reached " + in.APIBaseURL()},
			{Check: "do-token", Verdict: OK, Detail: "DigitalOcean accepted the token from " + from},
			{Check: "do-cluster", Verdict: Fail, Detail: fmt.Sprintf("cluster %s was not found at %s (404%s): a wrong cluster_id, or a cluster of another account or team than the token's", in.ClusterID(), in.APIBaseURL(), req),
				Fix: "set cluster_id to the ID `doctl kubernetes cluster list` shows for this cluster (with a token of the same team)"}}
	}
	return Report{{Check: "do-api", Verdict: Fail, Detail: fmt.Sprintf("reading cluster %s failed: %v", in.ClusterID(), err),
		Fix: "retry; a 429 means the token's rate limit is spent (another user of the token), a 5xx a DigitalOcean outage (status.digitalocean.com)"}}
}

func describeCluster(c *godo.KubernetesCluster) Result {
	version := c.VersionSlug
	if version == "" {
		version = "(not reported)"
	}
	state := "(not reported)"
	if c.Status != nil && c.Status.State != "" {
		state = string(c.Status.State)
	}
	res := Result{Check: "do-cluster", Verdict: OK, Detail: fmt.Sprintf("cluster %s (%s): region %s, Kubernetes %s, state %s", c.Name, c.ID, c.RegionSlug, version, state)}
	if c.Status != nil && c.Status.State != "" && c.Status.State != godo.KubernetesClusterStatusRunning {
		res.Verdict = Warn
		res.Fix = "wait for the cluster to be running (doctl kubernetes cluster get " + c.ID + ")"
	}
	if c.RegionSlug == "" {
		res.Verdict = Warn
		res.Detail += "; the answer names no region, so sizes cannot be checked against it"
	}
	return res
}

// tagScope reads tag:read from the listing: DOKS tags every pool (k8s,
// k8s-worker, k8s:<cluster id>), and a token without tag:read is answered
// with pools without tags (DigitalOcean's API specification).
func tagScope(pools []*godo.KubernetesNodePool, n needs, from string) Result {
	res := Result{Check: "do-scope-tag-read"}
	tagged := slices.ContainsFunc(pools, func(p *godo.KubernetesNodePool) bool { return p != nil && len(p.Tags) > 0 })
	switch {
	case len(pools) == 0:
		res.Verdict, res.Detail = Warn, "the cluster has no node pool, so whether the token sees tags (tag:read) cannot be told"
	case tagged:
		res.Verdict, res.Detail = OK, "pools' tags are visible: the token has "+scopeTagRead
	case len(n.tags) > 0:
		res.Verdict = Fail
		res.Detail = fmt.Sprintf("none of the %d pools carries any tag, though DOKS tags every pool: the token lacks %s, needed by %s", len(pools), scopeTagRead, strings.Join(n.tags, ", "))
		if !n.tagsBlock {
			res.Verdict = Warn
			res.Detail += ": pools tagged " + digitalocean.TagConsolidate + " are never consolidated (only the pools the autoscaler created are), and the running autoscaler does not say why"
		}
		res.Fix = tokenFix(from)
	default:
		res.Verdict = OK
		res.Detail = fmt.Sprintf("none of the %d pools carries any tag: the token most likely lacks %s, which this configuration does not need (node_pool_selection=tags, autoprovisioning and the consolidate tag do)", len(pools), scopeTagRead)
	}
	return res
}

func writeScopes(o config.AutoscalingOptions) string {
	s := scopeKubernetesUpdate + " is needed to resize pools and delete nodes"
	if o.NodeAutoprovisioningEnabled {
		s = scopeKubernetesUpdate + " is needed to resize, create and delete pools and delete nodes, and " + scopeTagCreate + " to create pools with their tags"
	}
	return s
}

func sizesScope(sizes []godo.Size, err error, n needs, from string) Result {
	res := Result{Check: "do-scope-sizes-read"}
	if err == nil {
		res.Verdict, res.Detail = OK, fmt.Sprintf("listed %d droplet sizes with their prices", len(sizes))
		return res
	}
	status, _ := digitalocean.APIErrorStatus(err)
	what := "listing droplet sizes failed: " + err.Error()
	if status == http.StatusForbidden {
		what = "listing droplet sizes was forbidden (403): the token lacks " + scopeSizesRead
	}
	if len(n.sizes) == 0 {
		res.Verdict, res.Detail = Warn, what+"; no enabled feature needs it (node autoprovisioning, consolidation and --expander=price do)"
		res.Fix = "nothing now; give the token " + scopeSizesRead + " before enabling one of those"
		return res
	}
	res.Verdict, res.Detail = Fail, what+"; needed by "+strings.Join(n.sizes, ", ")
	if status == http.StatusForbidden {
		res.Fix = tokenFix(from)
	}
	return res
}

// checkPools gives every pool a line: a node group or not, and why.
func checkPools(mode string, pools []*godo.KubernetesNodePool, autoprovisioning, shadow bool) Report {
	var r Report
	groups := 0
	sorted := slices.Clone(pools)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, p := range sorted {
		if p == nil {
			continue
		}
		res, group := poolResult(mode, p, shadow)
		if group {
			groups++
		}
		r = append(r, res)
	}
	res := Result{Check: "do-node-groups", Verdict: OK, Detail: fmt.Sprintf("%d of %d pools are node groups (node_pool_selection=%s)", groups, len(pools), mode)}
	if groups == 0 {
		if autoprovisioning {
			res.Detail += "; node autoprovisioning may create pools"
		} else {
			res.Verdict = Warn
			res.Detail += ": the autoscaler would run and scale nothing"
			res.Fix = "hand it a pool (" + docSelection + ", " + docMigration + ")"
		}
	}
	return append(r, res)
}

// poolResult is one pool's line, and whether it is a node group.
func poolResult(mode string, p *godo.KubernetesNodePool, shadow bool) (Result, bool) {
	sel := digitalocean.SelectPool(mode, p)
	res := Result{Check: "do-pool/" + p.Name}
	hasEnabledTag := slices.Contains(p.Tags, digitalocean.TagAutoscalerEnabled)
	if sel.NodeGroup {
		res.Verdict = OK
		how := "by its tags"
		if strings.Contains(sel.Note, "created by this autoscaler") {
			how = "created by this autoscaler"
		} else if mode != digitalocean.SelectByTags {
			how = "by auto_scale on"
		}
		res.Detail = fmt.Sprintf("pool %s (%s, %s): is a node group %s, min %d, max %d, count %d", p.Name, p.ID, p.Size, how, sel.MinSize, sel.MaxSize, p.Count)
		if p.AutoScale && shadow {
			res.Detail += fmt.Sprintf("; DOKS auto-scale is on for it (min_nodes %d, max_nodes %d): DOKS's managed autoscaler acts on it, and in shadow mode (--shadow) this one only records what it would do, to compare (%s)",
				p.MinNodes, p.MaxNodes, docMigration)
		} else if p.AutoScale {
			// Only auto_scale mode selects such a pool: DOKS's managed
			// autoscaler acts on it too.
			res.Verdict = Warn
			res.Detail += fmt.Sprintf("; DOKS auto-scale is on for it (min_nodes %d, max_nodes %d), so DOKS's managed autoscaler acts on it too: two autoscalers on one pool", p.MinNodes, p.MaxNodes)
			res.Fix = "unless DOKS's managed autoscaler is known not to run here, use node_pool_selection=tags: turn the pool's DOKS auto-scale off and tag it (" + docMigration + ")"
		} else if p.Count < sel.MinSize || p.Count > sel.MaxSize {
			res.Verdict = Warn
			res.Detail += fmt.Sprintf("; its count %d is outside min..max", p.Count)
			res.Fix = "resize the pool into its bounds or change the bounds"
		}
		return res, true
	}
	res.Detail = fmt.Sprintf("pool %s (%s, %s): %s", p.Name, p.ID, p.Size, strings.TrimPrefix(sel.Note, fmt.Sprintf("node pool %s (%s) ", p.Name, p.ID)))
	if !sel.Warn {
		res.Verdict = OK
		return res, false
	}
	res.Verdict = Warn
	switch {
	case mode == digitalocean.SelectByTags && p.AutoScale && hasEnabledTag:
		res.Detail = fmt.Sprintf("pool %s (%s, %s): conflict: it carries %s (this autoscaler's) and has DOKS auto-scale on (DOKS's managed autoscaler's), so both are asked to manage it; this autoscaler leaves it to DOKS until auto-scale is off",
			p.Name, p.ID, p.Size, digitalocean.TagAutoscalerEnabled)
		res.Fix = fmt.Sprintf("hand it over: doctl kubernetes cluster node-pool update <cluster> %s --auto-scale=false (keeping its tags), or remove the tag to leave it to DOKS (%s)", p.Name, docMigration)
	case mode == digitalocean.SelectByTags && p.AutoScale:
		res.Verdict = OK // left to DOKS by design
	case mode == digitalocean.SelectByTags:
		res.Fix = fmt.Sprintf("give it all three tags with whole numbers, min <= max: doctl kubernetes cluster node-pool update <cluster> %s --tag %s --tag %s<n> --tag %s<n> (its --tag replaces the pool's tags: repeat any you keep; %s)",
			p.Name, digitalocean.TagAutoscalerEnabled, digitalocean.TagPrefixMinNodes, digitalocean.TagPrefixMaxNodes, docSelection)
	default:
		res.Fix = fmt.Sprintf("correct min_nodes/max_nodes: doctl kubernetes cluster node-pool update <cluster> %s --min-nodes <n> --max-nodes <n>", p.Name)
	}
	return res, false
}

// checkAutoprovisioningSizes reports, for each allowed size pattern, the
// sizes a pool may be created with in the cluster's region and their
// prices, and each matching size that cannot be created there.
func checkAutoprovisioningSizes(in *digitalocean.Inspection, region string, sizes []godo.Size, enabled bool) Report {
	patterns := in.AutoprovisioningSizes()
	if patterns == nil {
		return nil
	}
	var r Report
	unused := ""
	if !enabled {
		unused = " (unused while --node-autoprovisioning-enabled is off)"
	}
	offeredTotal := 0
	warned := map[string]bool{} // a size two patterns allow gets one line
	for _, pat := range patterns {
		var offered, unavailable []string
		for _, s := range sizes {
			if ok, _ := path.Match(pat, s.Slug); !ok {
				continue
			}
			why := sizeUnavailable(s, region)
			if why == "" {
				offered = append(offered, fmt.Sprintf("%s $%.5f/h ($%.2f/month)", s.Slug, s.PriceHourly, s.PriceMonthly))
				continue
			}
			unavailable = append(unavailable, s.Slug)
			if warned[s.Slug] {
				continue
			}
			warned[s.Slug] = true
			r = append(r, Result{Check: "do-autoprovisioning-size/" + s.Slug, Verdict: Warn,
				Detail: fmt.Sprintf("size %s (allowed by %q, $%.5f/h) %s: no pool of it can be created%s", s.Slug, pat, s.PriceHourly, why, unused),
				Fix:    "remove it from autoprovisioning.sizes, or run the cluster in a region that offers it"})
		}
		offeredTotal += len(offered)
		res := Result{Check: "do-autoprovisioning/" + pat, Verdict: OK}
		switch {
		case len(offered) > 0:
			res.Detail = fmt.Sprintf("%q allows %d sizes offered in %s: %s%s", pat, len(offered), region, strings.Join(offered, ", "), unused)
		case len(unavailable) > 0:
			res.Verdict = Warn
			res.Detail = fmt.Sprintf("%q matches only sizes that cannot be created in %s (%s)%s", pat, region, strings.Join(unavailable, ", "), unused)
			res.Fix = "allow sizes the region offers (doctl compute size list)"
		default:
			res.Verdict = Warn
			res.Detail = fmt.Sprintf("%q matches no size of the Sizes API's %d%s", pat, len(sizes), unused)
			res.Fix = "correct the slug or pattern (doctl compute size list)"
		}
		r = append(r, res)
	}
	if enabled && offeredTotal == 0 {
		r = append(r, Result{Check: "do-autoprovisioning", Verdict: Fail,
			Detail: fmt.Sprintf("--node-autoprovisioning-enabled is on but no allowed size can be created in %s: no pool would ever be created", region),
			Fix:    "allow sizes the region offers in autoprovisioning.sizes (doctl compute size list)"})
	}
	return r
}

// sizeUnavailable says why no droplet of s can be created in region ("" if
// one can): the Sizes API's available flag and its regions.
func sizeUnavailable(s godo.Size, region string) string {
	switch {
	case !s.Available:
		return "is not available (the Sizes API's available is false: new droplets cannot be created with it)"
	case region != "" && !slices.Contains(s.Regions, region):
		return fmt.Sprintf("is not offered in %s (only %s)", region, strings.Join(s.Regions, ", "))
	}
	return ""
}

// checkPrices says whether every node group's size has a price, which
// consolidation and the price expander compare.
func checkPrices(mode string, pools []*godo.KubernetesNodePool, sizes []godo.Size) Result {
	priced := map[string]bool{}
	for _, s := range sizes {
		if s.PriceHourly > 0 {
			priced[s.Slug] = true
		}
	}
	var missing []string
	for _, p := range pools {
		if p != nil && digitalocean.SelectPool(mode, p).NodeGroup && !priced[p.Size] && !slices.Contains(missing, p.Size) {
			missing = append(missing, p.Size)
		}
	}
	if len(missing) > 0 {
		return Result{Check: "do-prices", Verdict: Warn, Detail: fmt.Sprintf("sizes of node groups without a price in the Sizes API: %s (contract-only sizes are not listed): their nodes cannot be priced", strings.Join(missing, ", ")),
			Fix: "leave these pools out of consolidation and the price expander, or use sizes the Sizes API prices"}
	}
	return Result{Check: "do-prices", Verdict: OK, Detail: "every node group's size has a price in the Sizes API"}
}

// withoutQuota is what the autoscaler does while the droplet quota is
// unknown (docs/limits.md, The droplet quota).
const withoutQuota = "the droplet quota stays unknown: the account's droplet limit is then learnt from DigitalOcean's 422 at the limit (the first create or resize past it is refused and scale-up of every group backs off), instead of plans staying under it (docs/limits.md#the-droplet-quota)"

// dropletReadScope probes droplet:read as the droplet quota reads it: GET
// /v2/account and GET /v2/droplets?per_page=1. DigitalOcean's API
// specification (digitalocean/openapi,
// specification/resources/account/models/account.yml) marks the account's
// droplet_limit "Requires `droplet:read` scope" (required_scopes:
// droplet:read): a token without it gets the account without the field,
// not a 403. A 403 on the account itself is a token that may not read the
// account (account:read in DigitalOcean's scope reference). Each miss is a
// warning: the scope is optional.
func dropletReadScope(ctx context.Context, in *digitalocean.Inspection, from string) Result {
	res := Result{Check: "do-scope-droplet-read", Verdict: Warn,
		Fix: fmt.Sprintf("optional: give the token from %s %s (or full access) so that plans stay under the droplet limit", from, scopeDropletRead)}
	acct, err := in.Account(ctx)
	if err != nil {
		status, _ := digitalocean.APIErrorStatus(err)
		if status == http.StatusForbidden {
			res.Detail = fmt.Sprintf("GET /v2/account was forbidden (403): the token may not read the account (%s), so %s", scopeAccountRead, withoutQuota)
			res.Fix = fmt.Sprintf("optional: give the token from %s %s and %s (or full access) so that plans stay under the droplet limit", from, scopeAccountRead, scopeDropletRead)
			return res
		}
		res.Detail = fmt.Sprintf("reading GET /v2/account failed: %v; while it fails %s", err, withoutQuota)
		res.Fix = "retry; if it persists, check DigitalOcean's status (status.digitalocean.com)"
		return res
	}
	if acct.DropletLimit <= 0 {
		res.Detail = fmt.Sprintf("GET /v2/account answered without droplet_limit, which DigitalOcean gives only to a token with %s: the token lacks it, so %s", scopeDropletRead, withoutQuota)
		return res
	}
	droplets, err := in.DropletCount(ctx)
	if err != nil {
		status, _ := digitalocean.APIErrorStatus(err)
		what := fmt.Sprintf("counting the account's droplets (GET /v2/droplets) failed: %v", err)
		if status == http.StatusForbidden {
			what = fmt.Sprintf("counting the account's droplets (GET /v2/droplets) was forbidden (403): the token lacks %s", scopeDropletRead)
		}
		res.Detail = fmt.Sprintf("droplet_limit %d read, but %s, so %s", acct.DropletLimit, what, withoutQuota)
		return res
	}
	res.Detail = fmt.Sprintf("the token has %s: droplet_limit %d, %d droplets on the account; plans stay under the limit (read every 10 minutes)", scopeDropletRead, acct.DropletLimit, droplets)
	if droplets >= acct.DropletLimit {
		res.Detail = fmt.Sprintf("the token has %s, and the account is at its droplet limit: %d droplets of droplet_limit %d, so no node can be added", scopeDropletRead, droplets, acct.DropletLimit)
		res.Fix = "delete droplets the account no longer needs, or ask DigitalOcean to raise the limit (Control Panel, Settings, Droplet limit)"
		return res
	}
	res.Verdict, res.Fix = OK, ""
	return res
}

// checkSizePreference reports autoprovisioning.size_preference against the
// Sizes API: an entry the API does not list, or that cannot be created in
// the cluster's region, is never used; none usable with autoprovisioning
// on means no pool is ever created.
func checkSizePreference(pref []string, region string, sizes []godo.Size, enabled bool) Report {
	if pref == nil {
		return nil
	}
	unused := ""
	if !enabled {
		unused = " (unused while --node-autoprovisioning-enabled is off)"
	}
	var r Report
	var usable []string
	for i, slug := range pref {
		at := slices.IndexFunc(sizes, func(s godo.Size) bool { return s.Slug == slug })
		if at < 0 {
			r = append(r, Result{Check: "do-autoprovisioning-preference/" + slug, Verdict: Warn,
				Detail: fmt.Sprintf("autoprovisioning.size_preference[%d] %q is not a size the Sizes API lists (%d sizes): it is never used%s", i, slug, len(sizes), unused),
				Fix:    "correct the slug (doctl compute size list) or remove it"})
			continue
		}
		if why := sizeUnavailable(sizes[at], region); why != "" {
			r = append(r, Result{Check: "do-autoprovisioning-preference/" + slug, Verdict: Warn,
				Detail: fmt.Sprintf("autoprovisioning.size_preference[%d] %q %s: it is never used%s", i, slug, why, unused),
				Fix:    "remove it, or run the cluster in a region that offers it"})
			continue
		}
		usable = append(usable, fmt.Sprintf("%s ($%.5f/h)", slug, sizes[at].PriceHourly))
	}
	res := Result{Check: "do-autoprovisioning-preference", Verdict: OK,
		Detail: fmt.Sprintf("pools on demand use these sizes only, the first that can be had and fits first: %s%s", strings.Join(usable, ", "), unused)}
	if len(usable) == 0 {
		res.Verdict = Warn
		res.Detail = fmt.Sprintf("no size of autoprovisioning.size_preference can be created in %s: no pool would be created%s", region, unused)
		res.Fix = "list sizes the region offers in autoprovisioning.size_preference (doctl compute size list), or remove the field"
		if enabled {
			res.Verdict = Fail
		}
	}
	return append(r, res)
}
