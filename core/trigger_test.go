package core

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// waitFor runs Wait in a goroutine and returns its result channel once the
// trigger is blocked on the fake clock.
func startWait(t *testing.T, tr *Trigger, c *testingclock.FakeClock, interval time.Duration, soon bool) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	go func() { out <- tr.Wait(context.Background(), interval, soon) }()
	deadline := time.Now().Add(5 * time.Second)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("trigger never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

func expect(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("woke for %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("did not wake (want %q)", want)
	}
}

func expectBlocked(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("woke early for %q", got)
	case <-time.After(20 * time.Millisecond):
	}
}

// settle waits until the trigger re-armed its timer after a notification.
func settle(c *testingclock.FakeClock) {
	for i := 0; i < 100 && !c.HasWaiters(); i++ {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
}

func TestTriggerIntervalOnly(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, true)
	ch := startWait(t, tr, c, 10*time.Second, false)
	c.Step(9 * time.Second)
	expectBlocked(t, ch)
	c.Step(time.Second)
	expect(t, ch, WakeInterval)
}

func TestTriggerIdleWindowBatchesPods(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, true)
	ch := startWait(t, tr, c, 60*time.Second, false)
	// A burst of pods 500ms apart keeps pushing the idle deadline.
	for i := 0; i < 4; i++ {
		tr.Notify()
		settle(c)
		c.Step(500 * time.Millisecond)
		expectBlocked(t, ch)
	}
	// Quiet for the idle window: fire.
	c.Step(500 * time.Millisecond)
	expect(t, ch, WakePods)
}

func TestTriggerMaxWindowCapsBatching(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 3*time.Second, true)
	ch := startWait(t, tr, c, 60*time.Second, false)
	woke := false
	// A new pod every 900ms never leaves the idle window quiet; the max
	// window (3s from the first pod) fires anyway.
	for i := 0; i < 10 && !woke; i++ {
		tr.Notify()
		settle(c)
		c.Step(900 * time.Millisecond)
		select {
		case got := <-ch:
			if got != WakePods {
				t.Fatalf("woke for %q", got)
			}
			if elapsed := c.Since(time.Unix(0, 0)); elapsed > 3600*time.Millisecond {
				t.Fatalf("fired after %s, max window is 3s", elapsed)
			}
			woke = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !woke {
		t.Fatal("max window never fired")
	}
}

func TestTriggerFrequentLoopsDisabled(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, false)
	ch := startWait(t, tr, c, 10*time.Second, true)
	tr.Notify()
	c.Step(5 * time.Second)
	expectBlocked(t, ch)
	c.Step(5 * time.Second)
	expect(t, ch, WakeInterval)
}

func TestTriggerSoonAfterActing(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, true)
	ch := startWait(t, tr, c, 10*time.Second, true)
	c.Step(time.Second)
	expect(t, ch, WakeSoon)
}

func TestTriggerStopsWithContext(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, true)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan string, 1)
	go func() { out <- tr.Wait(ctx, time.Hour, false) }()
	cancel()
	expect(t, out, WakeDone)
}

// A node removal that ends frees its --max-scale-down-parallelism budget:
// the next iteration starts at once rather than after the scan interval,
// after an iteration that acted as after one that did not; with
// --frequent-loops-enabled=false only the interval counts.
func TestKickStartsTheNextIterationAtOnce(t *testing.T) {
	for _, soon := range []bool{false, true} {
		c := testingclock.NewFakeClock(time.Unix(0, 0))
		tr := NewTrigger(c, time.Second, 10*time.Second, true)
		ch := startWait(t, tr, c, 10*time.Second, soon)
		expectBlocked(t, ch)
		tr.Kick()
		expect(t, ch, WakeRemoval)
	}
	// A kick during an iteration is not lost: the next Wait returns at once.
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	tr := NewTrigger(c, time.Second, 10*time.Second, true)
	tr.Kick()
	if got := tr.Wait(context.Background(), 10*time.Second, false); got != WakeRemoval {
		t.Fatalf("Wait after a kick woke for %q, want %q", got, WakeRemoval)
	}

	c = testingclock.NewFakeClock(time.Unix(0, 0))
	tr = NewTrigger(c, time.Second, 10*time.Second, false)
	ch := startWait(t, tr, c, 10*time.Second, false)
	tr.Kick()
	expectBlocked(t, ch)
	c.Step(10 * time.Second)
	expect(t, ch, WakeInterval)
}

// The loop wakes when the next unneeded node reaches its unneeded time,
// not up to a scan interval later.
func TestWaitIntervalEndsWhenTheNextNodeComesOfAge(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		next     time.Time
		frequent bool
		want     time.Duration
	}{
		{"no node waiting", time.Time{}, true, 10 * time.Second},
		{"node due in 3s", now.Add(3 * time.Second), true, 3 * time.Second},
		{"node due after the interval", now.Add(time.Minute), true, 10 * time.Second},
		{"node already due", now.Add(-time.Second), true, minWait},
		{"frequent loops off", now.Add(3 * time.Second), false, 10 * time.Second},
	} {
		a := &Autoscaler{nextScaleDownAt: tc.next}
		a.opts.ScanInterval = 10 * time.Second
		a.opts.FrequentLoopsEnabled = tc.frequent
		if got := a.waitInterval(now); got != tc.want {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.want)
		}
	}
}
