package controlplane

import (
	"testing"
	"time"
)

// TestLifecycleCatchUpAfterLostSession: answered heartbeats within the
// session timeout ask for no catch-up; one answered after a longer gap
// (the broker was cut off) records the controller's index then, which the
// broker's image must reach before it acts on its leaderships again.
func TestLifecycleCatchUpAfterLostSession(t *testing.T) {
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
