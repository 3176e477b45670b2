package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAndPrintsCloudConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	cfgPath := filepath.Join(t.TempDir(), "cloud.json")
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--token", "t", "--cluster-id", "c", "--pools", "3",
			"--fixed-pools", "1", "--cloud-config-out", cfgPath}, out, io.Discard)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "cloud-config written") {
		if time.Now().After(deadline) {
			t.Fatalf("no output: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ClusterID string `json:"cluster_id"`
		Token     string `json:"token"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterID != "c" || cfg.Token != "t" || !strings.HasPrefix(cfg.URL, "http://127.0.0.1:") {
		t.Fatalf("cloud config %+v", cfg)
	}
	if !strings.Contains(out.String(), cfg.URL) {
		t.Errorf("URL not printed: %s", out.String())
	}
	req, _ := http.NewRequest("GET", cfg.URL+"v2/kubernetes/clusters/c/node_pools", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		NodePools []struct {
			AutoScale bool `json:"auto_scale"`
		} `json:"node_pools"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if len(body.NodePools) != 4 || !body.NodePools[0].AutoScale || body.NodePools[3].AutoScale {
		t.Errorf("pools %+v", body.NodePools)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-id", "c"}, "--token is required"},
		{[]string{"--token", "t"}, "--cluster-id is required"},
		{[]string{"--token", "t", "--cluster-id", "c", "--pools", "-1"}, "must not be negative"},
		{[]string{"--token", "t", "--cluster-id", "c", "--droplet-limit", "-1"}, "--droplet-limit must not be negative"},
		{[]string{"--token", "t", "--cluster-id", "c", "--size", "no-such", "--addr", "127.0.0.1:0"}, `unknown size "no-such"`},
	} {
		err := run(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
