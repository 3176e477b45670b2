package digitalocean

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// cloudConfigFile is the JSON given with --cloud-config.
type cloudConfigFile struct {
	// ClusterID is the DOKS cluster's UUID.
	ClusterID string `json:"cluster_id"`
	// Token is a DigitalOcean API token given literally.
	Token string `json:"token"`
	// TokenFile is a file holding the token, e.g. a mounted Secret; it is
	// re-read when it changes, so the token can be rotated in place.
	TokenFile string `json:"token_file"`
	// URL overrides the API host (https://api.digitalocean.com); see
	// validateURL for the forms accepted.
	URL string `json:"url"`
	// NodePoolSelection says which pools are node groups: "auto_scale"
	// (the default) or "tags"; see selectPool.
	NodePoolSelection string `json:"node_pool_selection"`
	// Autoprovisioning says which pools may be created when
	// --node-autoprovisioning-enabled is on; see autoprovisioningFile.
	Autoprovisioning *autoprovisioningFile `json:"autoprovisioning"`
	// PriceOverrides are hourly prices in USD by size slug, in place of
	// the Sizes API's (contract prices) or for sizes it does not list.
	PriceOverrides map[string]float64 `json:"price_overrides"`
	// MaxNodeProvisionTimeBySize: size slug → a duration, in place of
	// --max-node-provision-time for pools of that size.
	MaxNodeProvisionTimeBySize map[string]string `json:"max_node_provision_time_by_size"`
}

// providerConfig is a validated cloud config.
type providerConfig struct {
	clusterID string
	// baseURL is empty for godo's default, else a server root ending in "/".
	baseURL     string
	tokenSource oauth2.TokenSource
	// selection is SelectByAutoScale or SelectByTags.
	selection string
	// autoprovisioning is nil when the section is absent.
	autoprovisioning *autoprovisioningConfig
	// priceOverrides: size slug → USD an hour (see parsePriceOverrides).
	priceOverrides map[string]float64
	// provisionTimes: size slug → max node provision time (see
	// parseProvisionTimes).
	provisionTimes map[string]time.Duration
}

// loadConfig reads and validates the cloud config file. It contacts no
// network: every mistake is reported before the provider is built.
func loadConfig(path string) (*providerConfig, error) {
	if strings.TrimSpace(path) == "" {
		return nil, errors.New("no cloud config given: --cloud-config must name a JSON file with cluster_id and token or token_file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read cloud config: %w", err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("cloud config %s: %w", path, err)
	}
	return cfg, nil
}

// parseConfig decodes and validates cloud config JSON. Error texts never
// include the token.
func parseConfig(data []byte) (_ *providerConfig, err error) {
	var f cloudConfigFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON object at %s", position(data, dec.InputOffset()))
	}

	token := strings.TrimSpace(f.Token)
	tokenFile := strings.TrimSpace(f.TokenFile)
	switch {
	case token != "" && tokenFile != "":
		return nil, errors.New("access token literal and access token file must not be provided together")
	case token == "" && tokenFile == "":
		return nil, errors.New("access token is not provided")
	}
	clusterID := strings.TrimSpace(f.ClusterID)
	if clusterID == "" {
		return nil, errors.New("cluster ID is not provided")
	}
	cfg := &providerConfig{clusterID: clusterID}
	switch f.NodePoolSelection {
	case "", SelectByAutoScale:
		cfg.selection = SelectByAutoScale
	case SelectByTags:
		cfg.selection = SelectByTags
	default:
		return nil, fmt.Errorf("node_pool_selection %s is not valid: want %q (the default) or %q", showWord(f.NodePoolSelection), SelectByAutoScale, SelectByTags)
	}
	if cfg.autoprovisioning, err = parseAutoprovisioning(f.Autoprovisioning); err != nil {
		return nil, err
	}
	if cfg.priceOverrides, err = parsePriceOverrides(f.PriceOverrides); err != nil {
		return nil, err
	}
	if cfg.provisionTimes, err = parseProvisionTimes(f.MaxNodeProvisionTimeBySize); err != nil {
		return nil, err
	}
	if token != "" {
		if err := checkToken(token); err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
	}
	if tokenFile != "" {
		src, err := newFileTokenSource(tokenFile)
		if err != nil {
			return nil, err
		}
		cfg.tokenSource = src
	} else {
		cfg.tokenSource = oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})
	}
	if f.URL != "" {
		u, err := validateURL(f.URL)
		if err != nil {
			return nil, err
		}
		cfg.baseURL = u
	}
	if err := checkClusterID(clusterID); err != nil {
		return nil, err
	}
	return cfg, nil
}

// jsonError says where a decoding error is, as line and column.
func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("cloud config is empty: want a JSON object with cluster_id and token or token_file")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: unexpected end of input at %s", position(data, int64(len(data))))
	case errors.As(err, &syn):
		// Offset is just past the offending character; point at it.
		return fmt.Errorf("malformed JSON at %s: %v", position(data, max(syn.Offset-1, 0)), err)
	case errors.As(err, &typ):
		// Offset is just past the value of the wrong type.
		return fmt.Errorf("malformed JSON at %s: field %q must be a %s, not a %s", position(data, typ.Offset), typ.Field, typ.Type, typ.Value)
	}
	// DisallowUnknownFields gives `json: unknown field "name"`.
	return fmt.Errorf("invalid cloud config: %v", err)
}

// position renders a byte offset as "line L, column C" (1-based).
func position(data []byte, offset int64) string {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line, col := 1, 1
	for _, b := range data[:offset] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d (offset %d)", line, col, offset)
}

// validateURL accepts https URLs, and plain http only for loopback hosts
// (a local simulator), so a token is never sent in clear over a network.
//
// The result is always the server's root, "scheme://host[:port]/": godo's
// Kubernetes paths are absolute ("/v2/kubernetes/..."), so a path in the
// base URL would be dropped by those calls yet kept by relative ones
// ("v2/sizes"). The forms users copy from DigitalOcean's docs, with or
// without "/v2" and a trailing slash, all mean the root; any other path (a
// proxy prefix) is refused rather than honoured for some calls only.
func validateURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url (%d characters) does not parse as a URL", len(raw))
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("url (%d characters) has no host: want an absolute URL such as https://api.digitalocean.com", len(raw))
	}
	shown := redactURL(u)
	if u.User != nil {
		return "", fmt.Errorf("url %s must not carry user information", shown)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return "", fmt.Errorf("url %s must use https (plain http is allowed only for loopback hosts)", shown)
		}
	default:
		return "", fmt.Errorf("url %s must use https, not %q", shown, u.Scheme)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("url %s must not have a query or fragment", shown)
	}
	switch u.EscapedPath() {
	case "", "/", "/v2", "/v2/":
	default:
		return "", fmt.Errorf("url %s has a path of %d characters: only the API root is accepted (https://host, optionally followed by /v2); requests go to /v2/... on that host, so a proxy path prefix is not supported", shown, len(u.EscapedPath()))
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}).String(), nil
}

// redactURL shows a URL as scheme://host/…, without user information,
// path, query or fragment, any of which may hold a secret put there by
// mistake.
func redactURL(u *url.URL) string {
	s := u.Scheme + "://" + u.Host + "/"
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		s += "…"
	}
	return s
}

// uuidPattern is the form of DOKS cluster IDs.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// checkClusterID wants a UUID, as DOKS cluster IDs are; the ID goes into
// every request path.
func checkClusterID(id string) error {
	if strings.HasPrefix(id, "<") && strings.HasSuffix(id, ">") {
		return fmt.Errorf("cluster_id %s is a template placeholder: replace it with the cluster's UUID (doctl kubernetes cluster list)", truncateText(id, 40))
	}
	if !uuidPattern.MatchString(id) {
		// Not echoed: it may be a token pasted into the wrong field.
		return fmt.Errorf("cluster_id (a value of %d characters) is not a UUID: want the cluster's ID as doctl kubernetes cluster list shows it, e.g. 123e4567-e89b-12d3-a456-426614174000", len(id))
	}
	return nil
}

// maxTokenLength is the longest token accepted. DigitalOcean tokens are
// about 70 characters; anything this long is a wrong file or a paste gone
// wrong.
const maxTokenLength = 1024

// checkToken refuses a token that cannot be one: control characters
// (including NUL) would corrupt the Authorization header.
func checkToken(token string) error {
	if len(token) > maxTokenLength {
		return fmt.Errorf("the token is %d bytes long, over %d: not a DigitalOcean token", len(token), maxTokenLength)
	}
	for i, r := range token {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("the token (%d characters) contains a control character at byte %d", len(token), i)
		}
	}
	return nil
}

// showPath prints a token_file value when it looks like a path (it holds
// a "/", which DigitalOcean tokens never do); anything else may be a token
// put into the wrong field and is named by its length only.
func showPath(p string) string {
	if strings.Contains(p, "/") {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("(a value of %d characters)", len(p))
}

// showWord prints a short word of letters, spaces, "-" and "_" (a typo
// of a mode name); anything else may be a token pasted into the wrong
// field (DigitalOcean tokens are about 70 characters) and is named by its
// length only.
func showWord(v string) string {
	if len(v) <= 20 && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_- ") == "" {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("(a value of %d characters)", len(v))
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
