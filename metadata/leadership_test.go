package metadata

import (
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/quirelog/quire/internal/poll"
)

// leaderGate stands between raft's leader channel and a node. While held
// it keeps only the last signal, as raft's own channel does for a slow
// reader, so a lost and regained leadership reaches the node as one
// "leader".
type leaderGate struct {
	mu   sync.Mutex
	held bool
	last *bool
	out  chan bool
	quit chan struct{}
}

func newLeaderGate(t *testing.T) *leaderGate {
	g := &leaderGate{out: make(chan bool), quit: make(chan struct{})}
	t.Cleanup(func() { close(g.quit) }) // before the cluster: runs after its shutdown
	return g
}

func (g *leaderGate) source(r *raft.Raft) <-chan bool {
	in := r.LeaderCh()
	go func() {
		for {
			var v bool
			select {
			case v = <-in:
			case <-g.quit:
				return
			}
			g.mu.Lock()
			if g.held {
				g.last = &v
				g.mu.Unlock()
				continue
			}
			g.mu.Unlock()
			select {
			case g.out <- v:
			case <-g.quit:
				return
			}
		}
	}()
	return g.out
}

func (g *leaderGate) hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

// release delivers the one signal kept while held, if any.
func (g *leaderGate) release() {
	g.mu.Lock()
	g.held = false
	last := g.last
	g.last = nil
	g.mu.Unlock()
	if last != nil {
		g.out <- *last
	}
}

func (c *Controller) loopTerm() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term, c.cancel != nil
}

func TestControllerRestartsLoopOnNewTerm(t *testing.T) {
	t.Parallel()
	gates := []*leaderGate{newLeaderGate(t), newLeaderGate(t), newLeaderGate(t)}
	c := newTestClusterWith(t, &testCluster{leadership: func(i int) func(*raft.Raft) <-chan bool { return gates[i].source }}, 3, 0, nil)
	a := c.waitController()
	ai := int(a.ID()) - 1
	term := a.raft.CurrentTerm()
	if lt, running := a.ctl.loopTerm(); !running || lt != term {
		t.Fatalf("controller loop of term %d (running %v), raft term %d", lt, running, term)
	}

	// Node a loses leadership and wins it back while its leadership
	// signals are held back: it then sees a single "leader".
	gates[ai].hold()
	// A transfer can time out on a loaded machine (raft gives it an
	// election timeout): try again until it is done.
	poll.True(t, "leadership to move away from node a", func() bool {
		if a.raft.State() == raft.Leader {
			_ = a.raft.LeadershipTransfer().Error()
		}
		return a.raft.State() != raft.Leader
	})
	b := c.waitController()
	if b == a {
		t.Fatal("leadership did not move")
	}
	poll.True(t, "the image to name the new controller", func() bool { return a.Image().ControllerID() == b.ID() })
	poll.True(t, "node a to lead again", func() bool {
		for _, n := range c.live() {
			if n != a && n.raft.State() == raft.Leader {
				_ = n.raft.LeadershipTransferToServer(serverID(a.ID()), raft.ServerAddress(a.cfg.AdvertisedAddr)).Error()
			}
		}
		return a.raft.State() == raft.Leader
	})
	newTerm := a.raft.CurrentTerm()
	if newTerm <= term {
		t.Fatalf("term %d after regaining leadership of term %d", newTerm, term)
	}
	gates[ai].release()

	// A new loop for the new term, which commits its own ControllerChange.
	poll.True(t, "a controller loop of the new term", func() bool {
		lt, running := a.ctl.loopTerm()
		return running && lt == newTerm
	})
	poll.True(t, "node a's ControllerChange of the new term", func() bool {
		return a.Image().ControllerID() == a.ID()
	})
	if c.waitController() != a {
		t.Fatal("node a is not the active controller")
	}
}
