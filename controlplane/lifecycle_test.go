package controlplane

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// TestLifecycleCatchUpAfterLostSession: answered heartbeats within the
// session timeout ask for no catch-up; one answered after a longer gap
// (the broker was cut off) records the controller's index then, which the
// broker's image must reach before it acts on its leaderships again.
func TestLifecycleCatchUpAfterLostSession(t *testing.T) {
	t.Parallel()
	l := &Lifecycle{session: time.Second}
	l.markAnswered(5)
	l.markAnswered(6)
	if got := l.CatchUpIndex(); got != 0 {
		t.Fatalf("catch-up %d without a lost session", got)
	}
	if l.SessionLost(time.Second) {
		t.Fatal("session lost right after an answer")
	}
	l.mu.Lock()
	l.answered = time.Now().Add(-2 * time.Second)
	l.mu.Unlock()
	if !l.SessionLost(time.Second) {
		t.Fatal("session not lost 2 s after the last answer")
	}
	l.markAnswered(42)
	if got := l.CatchUpIndex(); got != 42 || l.SessionLost(time.Second) {
		t.Fatalf("after the session came back: catch-up %d (want 42), lost %v", got, l.SessionLost(time.Second))
	}
}

// TestLifecycleSlowControllerKeepsSessions: a controller that answers
// heartbeats slower than the heartbeat interval (here twice as slow)
// keeps the brokers' sessions. A heartbeat that gave up at the interval
// counted none of the answers, and the broker thought its session lost
// after the session timeout while the controller kept it.
func TestLifecycleSlowControllerKeepsSessions(t *testing.T) {
	t.Parallel()
	const interval, session, delay = 50 * time.Millisecond, 2 * time.Second, 100 * time.Millisecond
	slow := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == pb.ControllerService_BrokerHeartbeat_FullMethodName {
			select {
			case <-time.After(delay): // the slow controller, not a wait for something
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return h(ctx, req)
	})
	c := newGClusterServing(t, 3, func(cfg *metadata.Config) {
		cfg.BrokerHeartbeatInterval, cfg.BrokerSessionTimeout = interval, session
	}, slow)
	c.waitLive(1, 2, 3)
	// A broker whose heartbeats go over gRPC to the controller (the
	// controller's own are answered in process).
	g := c.follower()
	start := g.life.LastHeartbeat()
	// Watch for longer than a session timeout: without the longer wait
	// not one heartbeat is answered meanwhile, and the session is lost.
	deadline := time.Now().Add(session + time.Second)
	for time.Now().Before(deadline) {
		if g.life.SessionLost(session) {
			t.Fatalf("broker %d lost its session (last answer %v ago) to a controller answering in %v", g.id, time.Since(g.life.LastHeartbeat()), delay)
		}
		time.Sleep(interval)
	}
	if last := g.life.LastHeartbeat(); !last.After(start) {
		t.Fatalf("broker %d: no heartbeat answered in %v", g.id, session+time.Second)
	}
}

// TestRegisterBackoffCapped: the wait between failed registrations
// doubles from 50 ms, reaches the limit and stays there, and is never
// above the limit nor negative, with any jitter and however many failures
// (doubling without a cap overflowed to a negative wait after about 38,
// and a fast refusal then spun a core).
func TestRegisterBackoffCapped(t *testing.T) {
	limits := []time.Duration{2 * time.Second, 30 * time.Millisecond, time.Hour, 0}
	jitters := map[string]func() float64{
		"none": func() float64 { return 0 },
		"most": func() float64 { return 0.999999 },
		"half": func() float64 { return 0.5 },
	}
	for _, limit := range limits {
		for name, rnd := range jitters {
			prev := time.Duration(0)
			for n := 1; n <= 1000; n++ {
				d := registerBackoff(n, limit, rnd)
				if d <= 0 {
					t.Fatalf("limit %v, jitter %s: wait %v after %d failures", limit, name, d, n)
				}
				capped := limit
				if capped <= 0 {
					capped = registerBackoffBase // no limit given: the first wait
				}
				if d > capped {
					t.Fatalf("limit %v, jitter %s: wait %v after %d failures, above the limit", limit, name, d, n)
				}
				if name == "none" && d < prev {
					t.Fatalf("limit %v: wait %v after %d failures shorter than %v after one fewer", limit, d, n, prev)
				}
				prev = d
			}
			if limit == 0 {
				continue
			}
			// After 100 failures (and 64, where an int64 shift wraps) the
			// wait is the limit, less at most a fifth.
			for _, n := range []int{64, 100} {
				if d := registerBackoff(n, limit, rnd); d < limit*4/5 || d > limit {
					t.Fatalf("limit %v, jitter %s: wait %v after %d failures, want within [%v, %v]", limit, name, d, n, limit*4/5, limit)
				}
			}
		}
	}
	if d := registerBackoff(1, 2*time.Second, func() float64 { return 0 }); d != registerBackoffBase {
		t.Fatalf("first retry waits %v, want %v", d, registerBackoffBase)
	}
	if d := registerBackoff(3, 2*time.Second, func() float64 { return 0 }); d != 4*registerBackoffBase {
		t.Fatalf("third retry waits %v, want %v", d, 4*registerBackoffBase)
	}
}
