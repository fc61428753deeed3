package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/quirelog/quire/client"
)

// The faults the nemesis injects.
const (
	FaultKill           = "kill"            // kill -9 a random node, restart it
	FaultKillController = "kill-controller" // kill -9 the controller, restart it
	FaultKillLeader     = "kill-leader"     // kill -9 a partition's leader, restart it
	FaultKillTwo        = "kill-two"        // kill -9 two nodes at once, restart both
	FaultPause          = "pause"           // SIGSTOP a node for seconds, SIGCONT
	FaultTornTail       = "torn-tail"       // kill -9 a node, cut bytes off an active segment, restart
	FaultIsolate        = "isolate"         // cut a node off from the others
	FaultCutLink        = "cut-link"        // cut the link between two nodes
	FaultSplit          = "split"           // a majority/minority split
	FaultDiskError      = "disk-error"      // EIO on a leader's writes and fsyncs, then a new disk (kill, restart)
	FaultClockJump      = "clock-jump"      // step a paused node's wall clock minutes or hours, resume, step it back
	FaultReassign       = "reassign"        // move a partition's replica to another node (or drop and re-add one), maybe cancel it
)

// AllFaults is every fault the nemesis knows, network ones last.
var AllFaults = []string{FaultKill, FaultKillController, FaultKillLeader, FaultKillTwo, FaultPause, FaultTornTail,
	FaultDiskError, FaultClockJump, FaultReassign, FaultIsolate, FaultCutLink, FaultSplit}

// MaxClockJump bounds the clock-jump fault's steps; the workload's topic
// keeps records four times as long (retention.ms), so that no step is
// cause enough to delete any.
const MaxClockJump = 6 * time.Hour

// testFault reports whether f needs a test build of the server (go
// build -tags chaosfs).
func testFault(f string) bool { return f == FaultDiskError || f == FaultClockJump }

func networkFault(f string) bool { return f == FaultIsolate || f == FaultCutLink || f == FaultSplit }

// nemesis injects one fault at a time, each held for a few seconds and
// then healed, with quiet periods between them.
type nemesis struct {
	c      *Cluster
	cl     *client.Client
	h      *History
	rng    *rand.Rand
	faults []string
	topic  string
	parts  int32
	// moveTopics are the topics the reassign fault moves partitions of
	// (none: topic's).
	moveTopics []string
	logf       func(string, ...any)
	seq        int
	// holdFor, when set, is how long every fault is held (the quiet
	// periods between faults keep their own range).
	holdFor time.Duration
}

func (n *nemesis) hold(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// faultHold is how long a fault is held: holdFor, or a random time in
// [lo, hi].
func (n *nemesis) faultHold(lo, hi time.Duration) time.Duration {
	if n.holdFor > 0 {
		return n.holdFor
	}
	return n.hold(lo, hi)
}

func (n *nemesis) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// run injects faults until ctx ends, then heals whatever is left.
func (n *nemesis) run(ctx context.Context) error {
	for ctx.Err() == nil {
		n.sleep(ctx, n.hold(time.Second, 3*time.Second))
		if ctx.Err() != nil {
			break
		}
		f := n.faults[n.rng.IntN(len(n.faults))]
		if err := n.inject(ctx, f); err != nil {
			return fmt.Errorf("chaos: fault %s: %w", f, err)
		}
	}
	return nil
}

// begin records a fault's start; the func it returns records its end.
func (n *nemesis) begin(kind string, nodes ...int) func() {
	n.seq++
	id := "f" + strconv.Itoa(n.seq)
	var ns []string
	for _, x := range nodes {
		ns = append(ns, strconv.Itoa(x))
	}
	node := strings.Join(ns, ",")
	n.logf("fault %s on node(s) %s", kind, node)
	n.h.Add(Event{Kind: FaultStart, Fault: kind, Node: node, Process: id})
	return func() { n.h.Add(Event{Kind: FaultEnd, Fault: kind, Node: node, Process: id}) }
}

func (n *nemesis) randomNode() *Node { return n.c.nodes[n.rng.IntN(len(n.c.nodes))] }

func (n *nemesis) ids() []int {
	var out []int
	for _, nd := range n.c.nodes {
		out = append(out, nd.ID)
	}
	return out
}

// inject applies fault f, holds it, heals it, and waits until every node
// serves again. A fault ends (its FaultEnd event) once healed and the
// cluster serves.
func (n *nemesis) inject(ctx context.Context, f string) error {
	// Healing and the wait for recovery must finish even when ctx ends.
	heal, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	switch f {
	case FaultKill, FaultKillController, FaultKillLeader, FaultTornTail:
		nd := n.randomNode()
		switch f {
		case FaultKillController:
			if id := n.controller(ctx); id > 0 {
				nd = n.c.Node(id)
			}
		case FaultKillLeader:
			if id := n.leader(ctx, int32(n.rng.IntN(int(n.parts)))); id > 0 {
				nd = n.c.Node(id)
			}
		}
		end := n.begin(f, nd.ID)
		if err := n.c.Kill(nd); err != nil {
			return err
		}
		if f == FaultTornTail {
			seg, cut, err := n.c.TearTail(nd, n.rng.IntN, 4096)
			if err != nil {
				return err
			}
			n.logf("tore %d bytes off %s", cut, seg)
		}
		n.sleep(ctx, n.faultHold(500*time.Millisecond, 3*time.Second))
		if err := n.c.Start(nd); err != nil {
			return err
		}
		err := n.c.WaitServing(heal, nd)
		end()
		return err
	case FaultKillTwo:
		a := n.randomNode()
		b := a
		for b == a {
			b = n.randomNode()
		}
		end := n.begin(f, a.ID, b.ID)
		_ = n.c.Kill(a)
		_ = n.c.Kill(b)
		n.sleep(ctx, n.faultHold(500*time.Millisecond, 3*time.Second))
		for _, nd := range []*Node{a, b} {
			if err := n.c.Start(nd); err != nil {
				return err
			}
		}
		for _, nd := range []*Node{a, b} {
			if err := n.c.WaitServing(heal, nd); err != nil {
				return err
			}
		}
		end()
		return nil
	case FaultDiskError:
		// A leader's disk, so that writes hit it at once.
		nd := n.randomNode()
		if id := n.leader(ctx, int32(n.rng.IntN(int(n.parts)))); id > 0 {
			nd = n.c.Node(id)
		}
		end := n.begin(f, nd.ID)
		if err := n.c.FailDisk(nd, true); err != nil {
			return err
		}
		n.sleep(ctx, n.hold(2*time.Second, 5*time.Second))
		// A new disk: the node's failed logs cannot be closed cleanly, so
		// it is killed, and starts on a working disk.
		if err := n.c.Kill(nd); err != nil {
			return err
		}
		if err := n.c.FailDisk(nd, false); err != nil {
			return err
		}
		if err := n.c.Start(nd); err != nil {
			return err
		}
		err := n.c.WaitServing(heal, nd)
		end()
		return err
	case FaultClockJump:
		// The controller (the group coordinator: session deadlines,
		// offsets expiry), a partition's leader (retention, the timestamps
		// it stamps) or any node.
		nd, role := n.randomNode(), "a node"
		switch n.rng.IntN(3) {
		case 0:
			if id := n.controller(ctx); id > 0 {
				nd, role = n.c.Node(id), "the controller"
			}
		case 1:
			p := int32(n.rng.IntN(int(n.parts)))
			if id := n.leader(ctx, p); id > 0 {
				nd, role = n.c.Node(id), fmt.Sprintf("partition %d's leader", p)
			}
		}
		step := n.clockStep()
		end := n.begin(f, nd.ID)
		n.logf("stepping node %d's clock (%s) by %v", nd.ID, role, step)
		// Stepped while the node is stopped, as a VM restored or a
		// clock corrected while a process sleeps: it wakes to the new time.
		if err := n.c.Pause(nd); err != nil {
			return err
		}
		if err := n.c.StepClock(nd, step); err != nil {
			return err
		}
		n.sleep(ctx, n.hold(200*time.Millisecond, time.Second))
		if err := n.c.Resume(nd); err != nil {
			return err
		}
		n.sleep(ctx, n.faultHold(3*time.Second, 8*time.Second))
		if err := n.c.StepClock(nd, 0); err != nil {
			return err
		}
		err := n.c.WaitServing(heal, nd)
		end()
		return err
	case FaultPause:
		nd := n.randomNode()
		end := n.begin(f, nd.ID)
		if err := n.c.Pause(nd); err != nil {
			return err
		}
		n.sleep(ctx, n.faultHold(2*time.Second, 6*time.Second))
		if err := n.c.Resume(nd); err != nil {
			return err
		}
		err := n.c.WaitServing(heal, nd)
		end()
		return err
	case FaultReassign:
		return n.reassign(ctx, heal)
	case FaultIsolate, FaultCutLink, FaultSplit:
		net := n.c.net
		ids := n.ids()
		n.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		var end func()
		var err error
		switch f {
		case FaultIsolate:
			end = n.begin(f, ids[0])
			err = net.Isolate(ids[0], ids)
		case FaultCutLink:
			end = n.begin(f, ids[0], ids[1])
			err = net.Cut(ids[0], ids[1])
		case FaultSplit:
			minority := ids[:(len(ids)-1)/2]
			end = n.begin(f, minority...)
			err = net.Split(minority, ids[len(minority):])
		}
		if err != nil {
			return err
		}
		n.sleep(ctx, n.faultHold(3*time.Second, 8*time.Second))
		if err := net.Heal(); err != nil {
			return err
		}
		for _, nd := range n.c.nodes {
			if err := n.c.WaitServing(heal, nd); err != nil {
				return err
			}
		}
		end()
		return nil
	}
	return fmt.Errorf("unknown fault %q", f)
}

// clockStep is a clock-jump's step: minutes or hours, forwards or
// backwards, at most MaxClockJump.
func (n *nemesis) clockStep() time.Duration {
	var d time.Duration
	if n.rng.IntN(2) == 0 {
		d = n.hold(time.Minute, 15*time.Minute)
	} else {
		d = n.hold(time.Hour, MaxClockJump)
	}
	d = d.Round(time.Second)
	if n.rng.IntN(2) == 0 {
		d = -d
	}
	return d
}

// controller asks the cluster which node is the controller (0: unknown).
func (n *nemesis) controller(ctx context.Context) int {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d, err := n.cl.DescribeCluster(rctx)
	if err != nil {
		return 0
	}
	return int(d.ControllerID)
}

// leader asks the cluster which node leads partition p (0: unknown).
func (n *nemesis) leader(ctx context.Context, p int32) int {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ds, err := n.cl.DescribeTopics(rctx, n.topic)
	if err != nil || len(ds) != 1 || int(p) >= len(ds[0].Partitions) {
		return 0
	}
	return int(ds[0].Partitions[p].Leader)
}
