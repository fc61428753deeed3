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
