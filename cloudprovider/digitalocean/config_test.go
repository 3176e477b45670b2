package digitalocean

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

const (
	fixtures       = "../../testdata/"
	literalToken   = "dop_v1_literaltoken0123456789abcdef"
	fileToken      = "dop_v1_correcttoken0123456789abcdef"
	fixtureCluster = "123e4567-e89b-12d3-a456-426614174000"
)

func TestLoadConfigFixtures(t *testing.T) {
	cases := []struct {
		file      string
		wantErr   string // substring; "" = valid
		wantToken string
		wantURL   string
	}{
		{file: "cloud-config-token.json", wantToken: literalToken},
		{file: "cloud-config-token-file.json", wantToken: fileToken, wantURL: "https://api.digitalocean.com/"},
		{file: "cloud-config-loopback-url.json", wantToken: literalToken, wantURL: "http://127.0.0.1:8081/"},
		{file: "cloud-config-both-tokens.json", wantErr: "access token literal and access token file must not be provided together"},
		{file: "cloud-config-no-token.json", wantErr: "access token is not provided"},
		{file: "cloud-config-no-cluster-id.json", wantErr: "cluster ID is not provided"},
		{file: "cloud-config-empty-token-file.json", wantErr: `token file "../../testdata/empty_token" is empty`},
		{file: "cloud-config-whitespace-token-file.json", wantErr: `token file "../../testdata/whitespace_token" is empty`},
		{file: "cloud-config-missing-token-file.json", wantErr: `failed to read token file "../../testdata/no_such_token": open: no such file or directory`},
		{file: "cloud-config-malformed.json", wantErr: "malformed JSON at line 4, column 3"},
		{file: "cloud-config-unknown-field.json", wantErr: `unknown field "region"`},
		{file: "cloud-config-wrong-type.json", wantErr: `malformed JSON at line 2, column 22 (offset 23): field "cluster_id" must be a string, not a number`},
		{file: "cloud-config-http-url.json", wantErr: `url http://api.example.com/ must use https (plain http is allowed only for loopback hosts)`},
		{file: "cloud-config-bad-url.json", wantErr: `url (32 characters) does not parse`},
		{file: "no-such-cloud-config.json", wantErr: "failed to read cloud config: open ../../testdata/no-such-cloud-config.json: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			cfg, err := loadConfig(fixtures + c.file)
			if endsWithError(t, err, c.wantErr) {
				return
			}
			tok, err := cfg.tokenSource.Token()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.clusterID != fixtureCluster || tok.AccessToken != c.wantToken || cfg.baseURL != c.wantURL {
				t.Errorf("got cluster %q token %q url %q", cfg.clusterID, tok.AccessToken, cfg.baseURL)
			}
		})
	}
}

func TestParseConfigRules(t *testing.T) {
	cases := []struct {
		name, json, wantErr string
	}{
		{"empty document", ``, "cloud config is empty"},
		{"truncated", `{"cluster_id": "c", "tok`, "malformed JSON: unexpected end of input at line 1, column 25"},
		{"trailing data", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t"} {}`, "unexpected data after the JSON object"},
		{"not an object", `["c"]`, "malformed JSON at line 1, column 2"},
		{"whitespace literal token", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "  "}`, "access token is not provided"},
		{"blank cluster id", `{"cluster_id": " ", "token": "t"}`, "cluster ID is not provided"},
		{"unknown field", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "tokne": "x"}`, `unknown field "tokne"`},
		{"ftp url", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "ftp://127.0.0.1/"}`, `must use https, not "ftp"`},
		{"no host", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "https:///v2"}`, "has no host"},
		{"relative url", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "api.digitalocean.com"}`, "has no host"},
		{"http public ip", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "http://10.0.0.1:8080/"}`, "must use https"},
		{"http loopback lookalike", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "http://localhost.example.com/"}`, "must use https"},
		{"query", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "https://x.example/?a=b"}`, "must not have a query"},
		{"user info", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "https://u:p@x.example/"}`, "must not carry user information"},
		{"http localhost", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "http://localhost:8081"}`, ""},
		{"http ipv6 loopback", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "http://[::1]:8081/"}`, ""},
		{"http 127.x", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "http://127.3.2.1/"}`, ""},
		{"https path prefix refused", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "https://proxy.example/do"}`, "url https://proxy.example/… has a path of 3 characters"},
		{"https v2 path", `{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "url": "https://api.digitalocean.com/v2"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig([]byte(c.json))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// The exact texts users and upstream's docs know.
func TestConfigErrorTextsExact(t *testing.T) {
	cases := map[string]string{
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000"}`:                                  "access token is not provided",
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "t", "token_file": "f"}`: "access token literal and access token file must not be provided together",
		`{"token": "t"}`: "cluster ID is not provided",
	}
	for in, want := range cases {
		_, err := parseConfig([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want exactly %q", in, err, want)
		}
	}
}

// No error message may carry the token, whatever else is wrong.
func TestConfigErrorsNeverContainToken(t *testing.T) {
	const secret = "dop_v1_SECRET_must_not_leak_42"
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokenPath, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret + `", "token_file": "` + tokenPath + `"}`,
		`{"token": "` + secret + `"}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret + `", "url": "http://example.com/"}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret + `", "url": "https://a b/%zz"}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret + `", "extra": 1}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret + `" "url": ""}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": ["` + secret + `"]}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token": "` + secret,
		`{"token_file": "` + tokenPath + `"}`,
		`{"cluster_id": "123e4567-e89b-12d3-a456-426614174000", "token_file": "` + tokenPath + `", "url": "http://8.8.8.8/"}`,
	}
	for _, in := range inputs {
		_, err := parseConfig([]byte(in))
		if err == nil {
			t.Errorf("%s: accepted", in)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error message leaks the token: %v", err)
		}
	}
}

func TestBuildDigitalOceanConfigErrors(t *testing.T) {
	cases := []struct{ path, want string }{
		{"", "no cloud config given: --cloud-config must name a JSON file"},
		{"   ", "no cloud config given"},
		{fixtures + "nope.json", "failed to read cloud config"},
		{fixtures, "failed to read cloud config"}, // a directory
		{fixtures + "cloud-config-no-token.json", "digitalocean: cloud config ../../testdata/cloud-config-no-token.json: access token is not provided"},
	}
	for _, c := range cases {
		opts := config.Defaults()
		opts.CloudConfig = c.path
		p, err := BuildDigitalOcean(opts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || p != nil {
			t.Errorf("%q: provider %v error %v, want %q", c.path, p, err, c.want)
		}
	}
}

// endsWithError checks a table case's error: with want set, err must contain
// it and the case ends there (true); without, err must be nil.
func endsWithError(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	return true
}
