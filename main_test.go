package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

// The test binary doubles as the autoscaler binary, so start-up is tested as
// a user meets it: a process, its exit code and its stderr.
func TestMain(m *testing.M) {
	if os.Getenv("CA_TEST_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// tripwire is a loopback listener that counts connections: a bad start-up
// must not contact Kubernetes or DigitalOcean.
func tripwire(t *testing.T) (addr string, contacts *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	contacts = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			contacts.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), contacts
}

func TestBadStartUpExitsBeforeContactingAnything(t *testing.T) {
	const token = "dop_v1_secret_token_never_printed"
	addr, contacts := tripwire(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := write("kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+addr+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	emptyToken := write("empty_token", "")
	blankToken := write("blank_token", " \n\t\n")
	goodToken := write("token", token+"\n")
	url := `"url": "http://` + addr + `"`

	cases := []struct {
		name    string
		config  string // cloud-config content; "-" means no file at all
		args    []string
		wantErr string
	}{
		{"missing file", "-", nil, "no such file"},
		{"no token", `{"cluster_id": "c1", ` + url + `}`, nil, "access token is not provided"},
		{"both tokens", `{"cluster_id": "c1", "token": "` + token + `", "token_file": "` + goodToken + `", ` + url + `}`, nil,
			"access token literal and access token file must not be provided together"},
		{"no cluster id", `{"token": "` + token + `", ` + url + `}`, nil, "cluster ID is not provided"},
		{"unreadable token file", `{"cluster_id": "c1", "token_file": "` + filepath.Join(dir, "nope") + `", ` + url + `}`, nil, "failed to read token file"},
		{"empty token file", `{"cluster_id": "c1", "token_file": "` + emptyToken + `", ` + url + `}`, nil, `token file "` + emptyToken + `" is empty`},
		{"whitespace token file", `{"cluster_id": "c1", "token_file": "` + blankToken + `", ` + url + `}`, nil, `token file "` + blankToken + `" is empty`},
		{"malformed json", `{"cluster_id": "c1" "token": "` + token + `"}`, nil, "line 1"},
		{"unknown field", `{"cluster_id": "c1", "token": "` + token + `", "region": "fra1"}`, nil, `"region"`},
		{"plain http to a remote host", `{"cluster_id": "c1", "token": "` + token + `", "url": "http://api.example.com/"}`, nil, "https"},
		{"unknown provider", `{"cluster_id": "c1", "token": "` + token + `", ` + url + `}`, []string{"--cloud-provider=aws"}, `unknown cloud provider "aws": this build offers digitalocean`},
		{"unsupported upstream flag", `{"cluster_id": "c1", "token": "` + token + `", ` + url + `}`, []string{"--nodes=1:3:pool"}, "--nodes"},
		{"bad flag value", `{"cluster_id": "c1", "token": "` + token + `", ` + url + `}`, []string{"--cores-total=8"}, "--cores-total"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "absent.json")
			if c.config != "-" {
				cfg = write(strings.ReplaceAll(c.name, " ", "_")+".json", c.config)
			}
			args := append([]string{"--cloud-config=" + cfg, "--kubeconfig=" + kubeconfig, "--address=127.0.0.1:0", "--leader-elect=false"}, c.args...)
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "CA_TEST_RUN_MAIN=1")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			elapsed := time.Since(start)
			if err == nil {
				t.Fatalf("exit 0, want non-zero; output:\n%s", out)
			}
			if !strings.Contains(string(out), c.wantErr) {
				t.Errorf("output does not name the problem %q:\n%s", c.wantErr, out)
			}
			if strings.Contains(string(out), token) {
				t.Errorf("output prints the token:\n%s", out)
			}
			if n := contacts.Load(); n != 0 {
				t.Errorf("%d connection(s) made to Kubernetes or DigitalOcean before failing", n)
			}
			t.Logf("exited in %v: %s", elapsed.Round(time.Millisecond), strings.TrimSpace(lastLine(string(out))))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The autoscaler asks the API server for uncompressed responses, as
// kube-scheduler does. (Over TLS, as in a cluster: client-go uses Go's
// default transport, compression and all, for a plain-HTTP server.)
func TestKubeClientsAskForUncompressedResponses(t *testing.T) {
	var acceptEncoding atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acceptEncoding.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"35","gitVersion":"v1.35.0"}`)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	opts.Kubeconfig = kubeconfig
	if _, err := newKubeClients(opts); err != nil {
		t.Fatal(err)
	}
	if got, ok := acceptEncoding.Load().(string); !ok || got != "" {
		t.Errorf("Accept-Encoding %q (request seen: %v), want none", got, ok)
	}
}
