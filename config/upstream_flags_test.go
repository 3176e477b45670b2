package config

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// upstreamFlag is one row of testdata/upstream-1.36.1-flags.tsv, the flags of
// upstream cluster-autoscaler 1.36.1 as its binary defines them.
type upstreamFlag struct {
	name, typ, def, do, probe string
	spellings                 []string
}

func readUpstreamFlags(t *testing.T) []upstreamFlag {
	t.Helper()
	f, err := os.Open("testdata/upstream-1.36.1-flags.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []upstreamFlag
	sc := bufio.NewScanner(f)
	header := true
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		if header {
			if strings.Join(cols, ",") != "name,type,default,do,spellings,probe,source" {
				t.Fatalf("unexpected header %q", line)
			}
			header = false
			continue
		}
		out = append(out, upstreamFlag{name: cols[0], typ: cols[1], def: cols[2], do: cols[3],
			spellings: strings.Split(cols[4], ","), probe: cols[5]})
	}
	if len(out) < 200 {
		t.Fatalf("read only %d flags", len(out))
	}
	return out
}

// probeRefused are upstream flags whose probe is not upstream's default (a
// repeatable or file flag has no default value to pass) and which this build
// implements at the default only: the probe must be refused, naming the flag.
var probeRefused = map[string]bool{}

// Every upstream flag a DigitalOcean user may set is defined, with upstream's
// default, and accepted at the value that stands for its default, in every
// spelling upstream accepts.
func TestEveryUpstreamFlagIsDefinedAndAcceptsItsDefault(t *testing.T) {
	dir := t.TempDir()
	schedulerConfig := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, u := range readUpstreamFlags(t) {
		if u.do != "yes" {
			continue
		}
		t.Run(u.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var out bytes.Buffer
			fs.SetOutput(&out)
			NewFlags(fs)
			fl := fs.Lookup(u.name)
			if fl == nil {
				t.Fatalf("--%s is not defined", u.name)
			}
			if fl.Hidden {
				t.Errorf("--%s is hidden: it is refused whatever its value", u.name)
			}
			if got, want := fl.DefValue, tsvDefault(u); got != want {
				t.Errorf("--%s default %q, upstream's %q", u.name, got, want)
			}
			probe := u.probe
			switch probe {
			case `""`:
				probe = ""
			case "{cloud-config}":
				probe = "/etc/do/cloud.json"
			case "{scheduler-config}":
				probe = schedulerConfig
			}
			for _, spelling := range u.spellings {
				fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
				fs.SetOutput(&out)
				args := []string{spelling + "=" + probe}
				if u.name != "cloud-config" {
					args = append(args, "--cloud-config=/etc/do/cloud.json")
				}
				_, err := NewFlags(fs).Parse(args)
				switch {
				case probeRefused[u.name]:
					if err == nil || !strings.Contains(err.Error(), "--"+u.name+"=") || !strings.Contains(err.Error(), "is refused") {
						t.Errorf("%s: got %v, want a refusal naming --%s", args[0], err, u.name)
					}
				case err != nil:
					t.Errorf("%s refused: %v", args[0], err)
				default:
					accepted++
				}
			}
			if out.Len() > 0 {
				t.Errorf("parsing printed %q", out.String())
			}
		})
	}
	t.Logf("%d upstream spellings accepted at their default", accepted)
}

// tsvDefault is the table's default as pflag prints it.
func tsvDefault(u upstreamFlag) string {
	switch {
	case u.def == `""`:
		return ""
	case u.typ == "severity" && u.def == "INFO":
		return "0" // klog prints severities as numbers
	}
	return u.def
}

// Flags of other providers, node-group discovery, ProvisioningRequests, gRPC
// and Ginkgo are refused with a reason, never with a usage dump.
func TestUpstreamFlagsForOtherSetUpsAreRefusedWithAReason(t *testing.T) {
	for _, u := range readUpstreamFlags(t) {
		if u.do != "no" {
			continue
		}
		for _, spelling := range u.spellings {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var out bytes.Buffer
			fs.SetOutput(&out)
			value := "1"
			if u.typ == "bool" {
				value = "true"
			}
			_, err := NewFlags(fs).Parse([]string{spelling + "=" + value, "--cloud-config=/etc/do/cloud.json"})
			if err == nil || !strings.Contains(err.Error(), "--"+u.name+" is an upstream cluster-autoscaler flag this build does not support: ") {
				t.Errorf("%s=%s: got %v, want a refusal with a reason", spelling, value, err)
			}
			if out.Len() > 0 {
				t.Errorf("%s: parsing printed %q", spelling, out.String())
			}
		}
	}
}
