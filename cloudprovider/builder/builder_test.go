package builder

import (
	"bufio"
	"errors"
	"go/build/constraint"
	"os"
	"strings"
	"testing"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
)

type fakeProvider struct {
	cloudprovider.CloudProvider
	rl *cloudprovider.ResourceLimiter
}

func TestNewCloudProvider(t *testing.T) {
	var got *cloudprovider.ResourceLimiter
	RegisterCloudProvider("test-cloud", func(opts config.AutoscalingOptions, rl *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error) {
		got = rl
		if opts.CloudConfig == "fail" {
			return nil, errors.New("bad config")
		}
		return fakeProvider{rl: rl}, nil
	})
	t.Cleanup(func() { mu.Lock(); delete(factories, "test-cloud"); mu.Unlock() })

	opts := config.Defaults()
	opts.CloudProviderName = "test-cloud"
	opts.MinCoresTotal, opts.MaxCoresTotal = 2, 64
	opts.MinMemoryTotal, opts.MaxMemoryTotal = 4*config.GiB, 256*config.GiB
	p, err := NewCloudProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(fakeProvider); !ok || got == nil {
		t.Fatalf("provider %T", p)
	}
	// The flags are merged with the provider's limits once, by
	// resourcequotas: the provider's limiter starts without them.
	if res := got.GetResources(); len(res) != 0 {
		t.Errorf("limits %s given to the provider, want none (the flags are resourcequotas')", got)
	}

	opts.CloudConfig = "fail"
	if _, err := NewCloudProvider(opts); err == nil || !strings.Contains(err.Error(), "building cloud provider test-cloud: bad config") {
		t.Errorf("factory error: %v", err)
	}

	opts.CloudProviderName = "gce"
	_, err = NewCloudProvider(opts)
	if err == nil || err.Error() != `unknown cloud provider "gce": this build offers digitalocean, test-cloud` {
		t.Errorf("unknown provider: %v", err)
	}
	if got := strings.Join(AvailableProviders(), ","); got != "digitalocean,test-cloud" {
		t.Errorf("AvailableProviders %s", got)
	}
}

func TestDigitalOceanIsTheDefault(t *testing.T) {
	opts := config.Defaults()
	opts.CloudProviderName = ""
	opts.CloudConfig = "../../testdata/cloud-config-no-token.json"
	_, err := NewCloudProvider(opts)
	// Reaching DigitalOcean's config validation proves it was chosen.
	if err == nil || !strings.Contains(err.Error(), "building cloud provider digitalocean: digitalocean: cloud config") ||
		!strings.Contains(err.Error(), "access token is not provided") {
		t.Errorf("error %v", err)
	}
	opts.CloudConfig = "../../testdata/cloud-config-token.json"
	opts.CloudProviderName = "digitalocean"
	p, err := NewCloudProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "digitalocean" {
		t.Errorf("name %q", p.Name())
	}
	if rl, err := p.GetResourceLimiter(); err != nil || rl == nil || len(rl.GetResources()) != 0 {
		t.Errorf("provider limiter %s (%v), want one without the flags' limits", rl, err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("second registration did not panic")
		}
	}()
	RegisterCloudProvider("digitalocean", func(config.AutoscalingOptions, *cloudprovider.ResourceLimiter) (cloudprovider.CloudProvider, error) {
		return nil, nil
	})
}

// The router file is compiled with no tags and with -tags digitalocean.
func TestDigitalOceanBuildConstraint(t *testing.T) {
	f, err := os.Open("builder_digitalocean.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var expr constraint.Expr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if constraint.IsGoBuild(sc.Text()) {
			if expr, err = constraint.Parse(sc.Text()); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if expr == nil {
		t.Fatal("no //go:build line")
	}
	for _, tags := range [][]string{nil, {"digitalocean"}, {"digitalocean", "linux"}} {
		set := map[string]bool{}
		for _, tg := range tags {
			set[tg] = true
		}
		if !expr.Eval(func(tag string) bool { return set[tag] }) {
			t.Errorf("not compiled with tags %v", tags)
		}
	}
}
