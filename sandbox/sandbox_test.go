package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

func TestParsePools(t *testing.T) {
	tests := []struct {
		spec    string
		want    []doks.PoolSpec
		wantErr string
	}{
		{spec: "workers:s-2vcpu-4gb:1:1-5,fixed:s-2vcpu-4gb:1", want: []doks.PoolSpec{
			{Name: "workers", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5},
			{Name: "fixed", Size: "s-2vcpu-4gb", Count: 1},
		}},
		{spec: " zero:s-1vcpu-2gb:0:0-3 ", want: []doks.PoolSpec{{Name: "zero", Size: "s-1vcpu-2gb", Count: 0, AutoScale: true, MaxNodes: 3}}},
		{spec: "", wantErr: "no pools"},
		{spec: "a:s-2vcpu-4gb", wantErr: "want name:size:count"},
		{spec: "a:no-such-size:1", wantErr: "unknown size"},
		{spec: "a:s-2vcpu-4gb:-1", wantErr: "non-negative"},
		{spec: "a:s-2vcpu-4gb:1:5", wantErr: "not min-max"},
		{spec: "a:s-2vcpu-4gb:1:3-2", wantErr: "0 <= min <= max"},
		{spec: "a:s-2vcpu-4gb:9:1-5", wantErr: "outside 1-5"},
		{spec: "a:s-2vcpu-4gb:1,a:s-2vcpu-4gb:1", wantErr: "used twice"},
		{spec: ":s-2vcpu-4gb:1", wantErr: "name and size"},
	}
	for _, tc := range tests {
		got, err := ParsePools(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePools(%q) error %v, want one containing %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePools(%q): %v", tc.spec, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParsePools(%q) = %+v, want %+v", tc.spec, got, tc.want)
			continue
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.Name != w.Name || g.Size != w.Size || g.Count != w.Count || g.AutoScale != w.AutoScale || g.MinNodes != w.MinNodes || g.MaxNodes != w.MaxNodes {
				t.Errorf("ParsePools(%q)[%d] = %+v, want %+v", tc.spec, i, g, w)
			}
		}
	}
}

func TestSandboxStartsWithPoolsAndFiles(t *testing.T) {
	start := time.Now()
	sb, err := Start(Options{
		BootDelay: 100 * time.Millisecond,
		Pools: []doks.PoolSpec{
			{Name: "workers", Size: "s-2vcpu-4gb", Count: 1, AutoScale: true, MinNodes: 1, MaxNodes: 5},
			{Name: "fixed", Size: "s-1vcpu-2gb", Count: 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := sb.Dir
	t.Logf("sandbox with 3 nodes up in %v (control plane %v)", time.Since(start), sb.ControlPlane.Timings.Total)

	var cc CloudConfig
	data, err := os.ReadFile(sb.CloudConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cc); err != nil {
		t.Fatalf("cloud-config is not JSON: %v", err)
	}
	if cc.ClusterID != sb.ClusterID || cc.URL != sb.DOKS.URL() || cc.TokenFile != sb.TokenPath {
		t.Errorf("cloud-config %+v does not match the sandbox", cc)
	}
	if tok, err := os.ReadFile(cc.TokenFile); err != nil || strings.TrimSpace(string(tok)) == "" {
		t.Errorf("token file unreadable or empty: %v", err)
	}
	if _, err := os.Stat(sb.KubeconfigPath); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}

	// The API as the autoscaler sees it: the pool grows, a Node follows.
	pool, _ := sb.Pool("workers")
	if _, _, err := sb.GodoClient().Kubernetes.UpdateNodePool(context.Background(), sb.ClusterID, pool.ID,
		&godo.KubernetesNodePoolUpdateRequest{Count: ptr.To(2)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sb.WaitForNodes(ctx, "workers", 2); err != nil {
		t.Fatal(err)
	}

	sb.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind after Stop", dir)
	}
}

func TestSandboxOnSharedControlPlaneCleansUpItsNodes(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	for round := 0; round < 2; round++ {
		sb, err := Start(Options{ControlPlane: cp, BootDelay: 50 * time.Millisecond,
			Pools: []doks.PoolSpec{{Name: "shared", Size: "s-1vcpu-2gb", Count: 2}}})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sb.Stop()
		nodes, err := cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("control plane unusable after a sandbox stopped: %v", err)
		}
		if len(nodes.Items) != 0 {
			t.Fatalf("round %d: %d nodes left after Stop", round, len(nodes.Items))
		}
	}
}
