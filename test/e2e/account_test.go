package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/doks-autoscaler/cluster-autoscaler/core/pending"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// withoutDropletRead makes the scenario's token one without droplet:read:
// the account's droplet limit is not known, and the 422 at the limit is
// what the autoscaler learns it from (the fallback docs/limits.md describes).
func withoutDropletRead(t *testing.T, s *scenario) {
	t.Helper()
	token, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s.sb.DOKS.SetTokenWithoutDropletRead(strings.TrimSpace(string(token)))
}

// At the account's droplet limit DigitalOcean refuses the pool update with a
// 422; every pool would get the same answer, so the autoscaler backs off
// scale-up of all of them: one refused update, no storm of updates across
// pools, an event and the status ConfigMap in DigitalOcean's words. Once the
// limit is raised, the loop after the backoff scales. (A token without
// droplet:read: with it the limit is known before it is met, below.)
func TestDropletLimitBacksOffEveryPool(t *testing.T) {
	s := newScenario(t, scenarioOptions{dropletLimit: 4, pools: []doks.PoolSpec{
		autoscaled("a", 1, 1, 10), autoscaled("b", 1, 1, 10),
	}})
	withoutDropletRead(t, s)
	const backoff = 8 * time.Second
	// Two nodes take two pods; six more nodes would take the account to 8
	// droplets. All six are pending before the autoscaler starts, so its
	// first loop asks for them at once: pods that the scheduler marks
	// unschedulable across two batch windows would give a first update within
	// the limit, then the refused one.
	s.deploy("web", 8, bigPod)
	s.eventually("6 web pods unschedulable", 60*time.Second, func() error {
		n := 0
		for _, p := range s.pods("web") {
			if pending.IsUnschedulable(&p) {
				n++
			}
		}
		if n != 6 {
			return fmt.Errorf("%d unschedulable", n)
		}
		return nil
	})
	ca := s.startAutoscaler("--initial-node-group-backoff-duration="+backoff.String(), "--max-node-group-backoff-duration=1m")
	ev := s.waitEvent("FailedToScaleUpGroup", 60*time.Second)
	if !strings.Contains(ev.Message, doks.DropletLimitMessage) {
		t.Errorf("FailedToScaleUpGroup event %q does not give DigitalOcean's words %q", ev.Message, doks.DropletLimitMessage)
	}
	s.holds("one refused pool update", backoff/2, func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpUpdateNodePool); n != 1 {
			return fmt.Errorf("%d pool updates, want the one refused", n)
		}
		return nil
	})
	cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := cm.Data["status"]; strings.Count(st, doks.DropletLimitMessage) != 2 {
		t.Errorf("the status ConfigMap should show both pools backed off in DigitalOcean's words:\n%s", st)
	}
	if n := s.metric(ca, "cluster_autoscaler_failed_scale_ups_total", map[string]string{"reason": "dropletLimitExceeded"}); n != 1 {
		t.Errorf("failed_scale_ups_total{reason=dropletLimitExceeded} = %v, want 1", n)
	}

	s.sb.DOKS.SetDropletLimit(doks.DefaultDropletLimit)
	s.waitRunning("web", 8, 90*time.Second)
	if a, b := s.maxTarget("a"), s.maxTarget("b"); a+b != 8 {
		t.Errorf("pools reached %d + %d nodes, want 8 in all", a, b)
	}
}

// With droplet:read the droplet limit is known before it is met: the
// autoscaler asks for the droplets that are left and no more (no 422), says
// the quota is reached (a DropletQuotaReached event, the status ConfigMap's
// limits.dropletQuota), and once the limit is raised it scales within about
// a minute (the quota is read every minute while reached).
func TestDropletQuotaIsNeverPlannedPast(t *testing.T) {
	s := newScenario(t, scenarioOptions{dropletLimit: 4, pools: []doks.PoolSpec{
		autoscaled("a", 1, 1, 10), autoscaled("b", 1, 1, 10),
	}})
	s.deploy("web", 8, bigPod)
	s.eventually("6 web pods unschedulable", 60*time.Second, func() error {
		n := 0
		for _, p := range s.pods("web") {
			if pending.IsUnschedulable(&p) {
				n++
			}
		}
		if n != 6 {
			return fmt.Errorf("%d unschedulable", n)
		}
		return nil
	})
	s.startAutoscaler()
	ev := s.waitEvent("DropletQuotaReached", 90*time.Second)
	if !strings.Contains(ev.Message, "4 droplets of its droplet limit 4") {
		t.Errorf("DropletQuotaReached event %q", ev.Message)
	}
	s.eventually("the status ConfigMap's droplet quota Reached", 30*time.Second, func() error {
		cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := cm.Data["status"]; !strings.Contains(st, "dropletQuota:") || !strings.Contains(st, "status: Reached") {
			return fmt.Errorf("status:\n%s", st)
		}
		return nil
	})
	s.holds("no update past the limit", 10*time.Second, func() error {
		if n := s.sb.DOKS.RequestCount(doks.OpUpdateNodePool); n != 1 {
			return fmt.Errorf("%d pool updates, want the one within the limit", n)
		}
		return nil
	})
	s.sb.DOKS.SetDropletLimit(doks.DefaultDropletLimit)
	s.waitRunning("web", 8, 150*time.Second)
}

// A token made from custom scopes without tag:read lists pools without
// their tags, so tags mode finds no node group. The autoscaler says so,
// naming the scope: in its log, the status ConfigMap's message and an event.
func TestTagsModeWithoutTagReadSaysSo(t *testing.T) {
	tags := []string{"k8s", "k8s-worker", "k8s-cluster-autoscaler-enabled", "k8s-cluster-autoscaler-min:1", "k8s-cluster-autoscaler-max:3"}
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{{Name: "tagged", Size: size, Count: 1, Tags: tags}}})
	token, err := os.ReadFile(s.sb.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s.sb.DOKS.SetTokenWithoutTagRead(strings.TrimSpace(string(token)))
	ca := s.startAutoscaler("--cloud-config=" + s.tagsModeConfig())
	ev := s.waitEvent("CloudProviderProblem", 60*time.Second)
	if !strings.Contains(ev.Message, "tag:read") {
		t.Errorf("CloudProviderProblem event %q does not name the tag:read scope", ev.Message)
	}
	s.eventually("the status ConfigMap's message naming tag:read", 30*time.Second, func() error {
		cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := cm.Data["status"]; !strings.Contains(st, "message:") || !strings.Contains(st, "tag:read") {
			return fmt.Errorf("status:\n%s", st)
		}
		return nil
	})
	if n := len(logLines(ca.LogPath, "lacks the tag:read scope")); n != 1 {
		t.Errorf("the tag:read error was logged %d times, want once", n)
	}
}
