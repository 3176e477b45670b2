package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(options) bool
	}{
		{args: nil, check: func(o options) bool { return o.pools == DefaultPools && o.dir == "" && o.bootDelay == 2*time.Second }},
		{args: []string{"--dir", "/tmp/x", "--pools", "a:s-2vcpu-4gb:0:0-3"}, check: func(o options) bool { return o.dir == "/tmp/x" && o.pools == "a:s-2vcpu-4gb:0:0-3" }},
		{args: []string{"--boot-delay", "0s"}, wantErr: "must be positive"},
		{args: []string{"extra"}, wantErr: "unexpected arguments"},
		{args: []string{"--no-such-flag"}, wantErr: "not defined"},
	}
	for _, tc := range tests {
		o, err := parseFlags(tc.args, io.Discard)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseFlags(%v) error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(o) {
			t.Errorf("parseFlags(%v) = %+v, %v", tc.args, o, err)
		}
	}
}

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

func TestRunPrintsWhereEverythingIs(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--dir", dir, "--boot-delay", "100ms"}, &out, io.Discard) }()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "Press Ctrl-C") {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner after 90s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	banner := out.String()
	for _, want := range []string{
		filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "cloud-config.json"), "http://127.0.0.1:",
		"--cloud-provider=digitalocean", "--cloud-config=" + filepath.Join(dir, "cloud-config.json"),
		"workers      1 × s-2vcpu-4gb, autoscaled 1..5", "fixed        1 × s-2vcpu-4gb, not autoscaled",
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	for _, f := range []string{"kubeconfig", "cloud-config.json", "do-token"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not stop after the context ended")
	}
}
