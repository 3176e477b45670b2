package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Leader election timings of the HA tests: short, so that a takeover after a crash
// happens in seconds rather than the production 15s.
const (
	haLeaseDuration = 4 * time.Second
	haRetryPeriod   = time.Second
	// leaseName is the default --leader-elect-resource-name.
	leaseName = "cluster-autoscaler"
)

func haArgs() []string {
	return []string{
		"--leader-elect=true",
		"--leader-elect-lease-duration=" + haLeaseDuration.String(),
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=" + haRetryPeriod.String(),
	}
}

// leaseChange is one observed state of the Lease.
type leaseChange struct {
	at     time.Time
	holder string
}

// leaseRecorder watches the leader election Lease and keeps every holder it saw, so that
// a release (holder cleared) that lasts only milliseconds is not missed by polling.
type leaseRecorder struct {
	mu      sync.Mutex
	changes []leaseChange
}

func (s *scenario) recordLease(ns string) *leaseRecorder {
	r := &leaseRecorder{}
	go func() {
		rv := ""
		for s.ctx.Err() == nil {
			w, err := s.kube.CoordinationV1().Leases(ns).Watch(s.ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", leaseName).String(),
				ResourceVersion: rv,
			})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = "" // expired resource version: start over from the current state
					break
				}
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				rv = l.ResourceVersion
				holder := ""
				if ev.Type != watch.Deleted && l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				r.mu.Lock()
				if n := len(r.changes); n == 0 || r.changes[n-1].holder != holder {
					r.changes = append(r.changes, leaseChange{at: time.Now(), holder: holder})
				}
				r.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return r
}

// since returns the holders seen at or after t, in order.
func (r *leaseRecorder) since(t time.Time) []leaseChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []leaseChange
	for _, c := range r.changes {
		if !c.at.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// leaseHolder is the Lease's current holderIdentity ("" when free or absent).
func (s *scenario) leaseHolder(ns string) (string, error) {
	l, err := s.kube.CoordinationV1().Leases(ns).Get(s.ctx, leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

var identityLine = regexp.MustCompile(`"Waiting to acquire the Lease" lease="[^"]+" identity="([^"]+)"`)

// electionIdentity reads the identity a replica announced in its log at start-up.
func (s *scenario) electionIdentity(ca *autoscaler) string {
	s.t.Helper()
	var id string
	s.eventually("the leader election identity in "+ca.LogPath, 30*time.Second, func() error {
		data, err := os.ReadFile(ca.LogPath)
		if err != nil {
			return err
		}
		m := identityLine.FindSubmatch(data)
		if m == nil {
			return fmt.Errorf("no %q line yet", "Waiting to acquire the Lease")
		}
		id = string(m[1])
		return nil
	})
	return id
}

// logLines are the lines of an autoscaler log containing substr.
func logLines(path, substr string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// coreLines are the lines only a replica running the autoscaling loop writes.
func coreLines(path string) []string {
	var out []string
	for _, substr := range []string{"Scale-up:", "Scale-down:", "Setting node pool count"} {
		out = append(out, logLines(path, substr)...)
	}
	return out
}

// scaleUpLines are the provider's lines for a pool count increase, one per request.
func scaleUpLines(path string) []string {
	var out []string
	for _, l := range logLines(path, "Setting node pool count") {
		if strings.Contains(l, `why="increase"`) {
			out = append(out, l)
		}
	}
	return out
}

// haPair starts two replicas with leader election on and returns (leader, follower) and
// their identities, once exactly one of them holds the Lease.
func (s *scenario) haPair() (leader, follower *autoscaler, leaderID, followerID string) {
	s.t.Helper()
	a := s.startAutoscaler(haArgs()...)
	b := s.startAutoscaler(haArgs()...)
	ids := map[*autoscaler]string{a: s.electionIdentity(a), b: s.electionIdentity(b)}
	if ids[a] == ids[b] {
		s.t.Fatalf("both replicas use the identity %s", ids[a])
	}
	var holder string
	s.eventually("a replica holding the Lease", 30*time.Second, func() error {
		h, err := s.leaseHolder(s.ns)
		if err != nil {
			return err
		}
		if h == "" {
			return fmt.Errorf("Lease %s/%s has no holder", s.ns, leaseName)
		}
		holder = h
		return nil
	})
	switch holder {
	case ids[a]:
		leader, follower = a, b
	case ids[b]:
		leader, follower = b, a
	default:
		s.t.Fatalf("Lease held by %q, which is neither replica (%s, %s)", holder, ids[a], ids[b])
	}
	s.eventually("the leader's log to say so", 15*time.Second, func() error {
		if len(logLines(leader.LogPath, "this replica is the leader")) == 0 {
			return fmt.Errorf("no %q line in %s", "this replica is the leader", leader.LogPath)
		}
		return nil
	})
	s.t.Logf("leader %s, follower %s", ids[leader], ids[follower])
	return leader, follower, ids[leader], ids[follower]
}

// onlyLeaderHolds checks that over d the Lease stays with id and the follower never claims to lead.
func (s *scenario) onlyLeaderHolds(id string, follower *autoscaler, d time.Duration) {
	s.t.Helper()
	s.holds("one leader", d, func() error {
		h, err := s.leaseHolder(s.ns)
		if err != nil {
			return err
		}
		if h != id {
			return fmt.Errorf("Lease holder changed to %q", h)
		}
		if l := logLines(follower.LogPath, "this replica is the leader"); len(l) > 0 {
			return fmt.Errorf("the follower claims the lead: %s", l[0])
		}
		if !follower.Running() {
			return fmt.Errorf("the follower exited: %v", follower.Err())
		}
		return nil
	})
}

// Two replicas: one leads and alone scales; killed without a chance to release the Lease,
// the other takes over once the Lease expires and serves new pending pods.
func TestHALeaderFailover(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("ha", 1, 1, 6)}})
	leases := s.recordLease(s.ns)
	leader, follower, leaderID, followerID := s.haPair()
	s.onlyLeaderHolds(leaderID, follower, 3*time.Second)

	// The existing node takes one pod; two more nodes are needed, asked for once.
	s.deploy("web", 3, bigPod)
	s.waitTarget("ha", 3, 60*time.Second)
	s.waitRunning("web", 3, 60*time.Second)
	s.holds("target 3", 3*time.Second, s.targetIs("ha", 3))
	if m := s.maxTarget("ha"); m != 3 {
		t.Errorf("pool reached %d nodes, want exactly 3", m)
	}
	if l := scaleUpLines(leader.LogPath); len(l) != 1 {
		t.Errorf("the leader asked for %d increase(s), want 1: %q", len(l), l)
	}
	if l := coreLines(follower.LogPath); len(l) > 0 {
		t.Errorf("the follower ran the autoscaling loop: %q", l)
	}
	s.onlyLeaderHolds(leaderID, follower, time.Second)

	// A crash: no release, the follower must wait for the Lease to expire.
	killed := time.Now()
	leader.Kill()
	took := s.waitForLeaseHolder(followerID, killed)
	t.Logf("handover after SIGKILL: %v (lease duration %v, retry period %v)", took.Round(10*time.Millisecond), haLeaseDuration, haRetryPeriod)
	// The follower polls every 1 to 2.2 retry periods (client-go's jitter): it may see the
	// last renewal one poll late and the expiry one poll late. Beyond that and some slack
	// for a loaded machine, it is not trying.
	if limit := haLeaseDuration + 2*22*haRetryPeriod/10 + 2*time.Second; took > limit {
		t.Errorf("takeover took %v, more than the lease duration and margin (%v)", took, limit)
	}
	for _, c := range leases.since(killed) {
		if c.holder == "" {
			t.Errorf("the Lease was released at %v after SIGKILL, which a killed process cannot do", c.at.Sub(killed))
		}
	}
	// The new pods come once the new leader's loop runs idle, as the first
	// ones did: a loop that starts while the Deployment's pods are still being
	// marked sees only some of them, and rightly asks again for the rest.
	s.eventually("the new leader's log to say so, and its loop to run idle", 15*time.Second, func() error {
		for _, line := range []string{"this replica is the leader", "Scale-up: no unschedulable pods"} {
			if len(logLines(follower.LogPath, line)) == 0 {
				return fmt.Errorf("no %q line in %s", line, follower.LogPath)
			}
		}
		return nil
	})

	// The new leader serves new pending pods, again exactly.
	s.deploy("api", 2, bigPod)
	s.waitTarget("ha", 5, 60*time.Second)
	s.waitRunning("api", 2, 60*time.Second)
	s.waitRunning("web", 3, 30*time.Second)
	s.holds("target 5", 3*time.Second, s.targetIs("ha", 5))
	if m := s.maxTarget("ha"); m != 5 {
		t.Errorf("pool reached %d nodes, want exactly 5", m)
	}
	if l := scaleUpLines(follower.LogPath); len(l) != 1 {
		t.Errorf("the new leader asked for %d increase(s), want 1: %q", len(l), l)
	}
	if !follower.Running() {
		t.Errorf("the new leader exited: %v", follower.Err())
	}
}

// SIGTERM on the leader: it releases the Lease on the way out, so the follower takes over
// at its next retry instead of waiting for the Lease to expire.
func TestHAGracefulRelease(t *testing.T) {
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("handover", 1, 1, 3)}})
	leases := s.recordLease(s.ns)
	leader, follower, leaderID, followerID := s.haPair()
	s.onlyLeaderHolds(leaderID, follower, 2*time.Second)

	stopped := time.Now()
	leader.Stop(20 * time.Second)
	exited := time.Since(stopped)
	if err := leader.Err(); err != nil {
		t.Errorf("the leader did not exit cleanly on SIGTERM: %v", err)
	}
	took := s.waitForLeaseHolder(followerID, stopped)
	t.Logf("handover after SIGTERM: %v (the old leader exited in %v; lease duration %v)",
		took.Round(10*time.Millisecond), exited.Round(10*time.Millisecond), haLeaseDuration)

	released := false
	for _, c := range leases.since(stopped) {
		if c.holder == "" {
			released = true
			t.Logf("Lease released %v after SIGTERM", c.at.Sub(stopped).Round(10*time.Millisecond))
			break
		}
		if c.holder == followerID {
			break
		}
	}
	if !released {
		t.Errorf("the leader did not release the Lease on SIGTERM; holders seen: %+v", leases.since(stopped))
	}
	if l := logLines(leader.LogPath, "Autoscaler stopped"); len(l) == 0 {
		t.Errorf("the old leader did not log its shutdown")
	}
	// The new leader works: it acts on a pending pod.
	s.deploy("web", 2, bigPod)
	s.waitTarget("handover", 2, 60*time.Second)
	s.waitRunning("web", 2, 60*time.Second)
	if l := scaleUpLines(follower.LogPath); len(l) == 0 {
		t.Errorf("the new leader's log has no scale-up line")
	}
}

// waitForLeaseHolder waits until id holds the Lease and returns how long that
// took from since.
func (s *scenario) waitForLeaseHolder(id string, since time.Time) time.Duration {
	var took time.Duration
	s.eventually("the follower to take the Lease", haLeaseDuration+15*time.Second, func() error {
		h, err := s.leaseHolder(s.ns)
		if err != nil {
			return err
		}
		if h != id {
			return fmt.Errorf("Lease held by %q", h)
		}
		took = time.Since(since)
		return nil
	})
	return took
}
