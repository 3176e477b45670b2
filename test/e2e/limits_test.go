package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// A GPU pod whose first-choice size (the cheapest allowed, L40S) is out of
// stock in the region: DigitalOcean refuses its pool with a 422, and the
// same loop creates a pool of the second size (H100); the refused size
// gets no second request within --unavailable-size-ttl.
func TestNextGPUSizeWhenTheFirstHasNoCapacity(t *testing.T) {
	const l40s = "gpu-l40sx1-48gb"
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("cpu", 1, 1, 2)}, bootDelay: time.Second})
	s.sb.DOKS.SetOutOfStock(l40s, time.Hour)
	s.startAutoscaler(napFlag, "--cloud-config="+s.napConfig("", "s-*", l40s, h100x1))
	start := time.Now()
	s.deploy("train", 1, smallPod, withGPU("nvidia.com/gpu", 1), tolerating("nvidia.com/gpu", ""))
	p := s.waitCreatedPool(60 * time.Second)
	took := time.Since(start)
	if p.Size != h100x1 {
		t.Errorf("created pool %s has size %s, want %s", p.Name, p.Size, h100x1)
	}
	ev := s.waitEvent("SizeUnavailable", 30*time.Second)
	if !strings.Contains(ev.Message, l40s) || !strings.Contains(ev.Message, doks.SizeUnavailableMessage) {
		t.Errorf("SizeUnavailable event %q", ev.Message)
	}
	s.waitRunning("train", 1, 60*time.Second)
	// More GPU pods within the TTL: no request for the refused size.
	s.deploy("train2", 2, smallPod, withGPU("nvidia.com/gpu", 1), tolerating("nvidia.com/gpu", ""))
	s.waitRunning("train2", 2, 90*time.Second)
	if n := s.sb.DOKS.StockRefusals(l40s); n != 1 {
		t.Errorf("%d requests for %s refused, want 1 within the TTL", n, l40s)
	}
	t.Logf("FIGURE e2e next-size: deploy to the second size's pool listed: %s; refused requests for %s: %d", took.Round(100*time.Millisecond), l40s, s.sb.DOKS.StockRefusals(l40s))
}

// A burst under --max-hourly-cost: the spend of the autoscaled pools,
// sampled every second, never goes above the limit, and the pods that fit
// under it run.
func TestBurstUnderASpendingLimit(t *testing.T) {
	const limit = 0.2 // USD/h; the "a" pool's nodes (s-2vcpu-4gb) cost $0.03571/h: 5 fit
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("a", 1, 1, 20)}})
	s.startAutoscaler(fmt.Sprintf("--max-hourly-cost=%v", limit))
	s.deploy("web", 12, bigPod)
	price, _ := doks.SizePrice(size)
	maxSpend := 0.0
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		spend := 0.0
		for _, p := range s.sb.DOKS.ListedPools() {
			spend += price * float64(p.Count)
		}
		maxSpend = max(maxSpend, spend)
		if spend > limit+1e-9 {
			t.Fatalf("spend $%.4f/h above --max-hourly-cost $%.2f/h", spend, limit)
		}
		time.Sleep(time.Second)
	}
	running := 0
	for _, p := range s.pods("web") {
		if p.Status.Phase == "Running" {
			running++
		}
	}
	ev := s.waitEvent("NotTriggerScaleUp", 30*time.Second)
	if !strings.Contains(ev.Message, "max hourly cost reached") {
		t.Errorf("NotTriggerScaleUp %q does not name the hourly cost", ev.Message)
	}
	t.Logf("FIGURE e2e spend-limit: 12 pods of %s, --max-hourly-cost $%.2f/h: max spend sampled every second over 45 s $%.4f/h; %d pods running; pending pods told %q",
		bigPod, limit, maxSpend, running, ev.Message)
}
