package controlplane

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/metadata"
)

// Lifecycle is a broker's side of its session with the controller:
// register, heartbeat every interval, register again when the controller
// says the broker is fenced or unknown, and a controlled shutdown on Stop.
type Lifecycle struct {
	f        *Forwarder
	self     metadata.BrokerInfo
	interval time.Duration
	log      hclog.Logger

	mu         sync.Mutex
	epoch      int64
	answered   time.Time // the last registration or heartbeat the controller answered
	session    time.Duration
	catchUp    uint64 // after a lost session: the controller's index when answered again
	registered chan struct{}
	stopCh     chan struct{}
	done       chan struct{}
	started    bool
	stopped    bool
}

// NewLifecycle returns the lifecycle of broker self (ID, Incarnation,
// Addr, Rack), heartbeating every interval.
// A gap of more than session (broker.session.timeout.ms) between two
// answered heartbeats is a lost session (see CatchUpIndex).
func NewLifecycle(f *Forwarder, self metadata.BrokerInfo, interval, session time.Duration, log hclog.Logger) *Lifecycle {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	return &Lifecycle{
		f: f, self: self, interval: interval, session: session, log: log.Named("lifecycle"),
		registered: make(chan struct{}), stopCh: make(chan struct{}), done: make(chan struct{}),
	}
}

// SessionLost reports whether the broker, once registered, has gone
// longer than timeout (broker.session.timeout.ms) without the controller
// answering a heartbeat: it has been, or is about to be, fenced, and
// another broker may lead its partitions by now.
func (l *Lifecycle) SessionLost(timeout time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.answered.IsZero() && time.Since(l.answered) > timeout
}

// CatchUpIndex is, after a lost session, the controller's metadata index
// when it answered again: until this broker's image has applied that far,
// it may still act on leaderships the controller moved while it was cut
// off. 0 when no session was lost.
func (l *Lifecycle) CatchUpIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.catchUp
}

func (l *Lifecycle) markAnswered(index uint64) {
	l.mu.Lock()
	now := time.Now()
	if !l.answered.IsZero() && l.session > 0 && now.Sub(l.answered) > l.session {
		l.catchUp = index
	}
	l.answered = now
	l.mu.Unlock()
}

// Start begins registering and heartbeating in the background.
func (l *Lifecycle) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.started = true
	go l.run()
}

// Epoch is the broker epoch of the current registration (0 before).
func (l *Lifecycle) Epoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// LastHeartbeat is when the controller last answered this broker's
// registration or heartbeat (the zero time: never).
func (l *Lifecycle) LastHeartbeat() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered
}

// Registered is closed after the first successful registration.
func (l *Lifecycle) Registered() <-chan struct{} { return l.registered }

// Stop ends the heartbeats, then asks the controller to move this broker's
// leaderships away (controlled shutdown), within ctx. With ctx already
// done it only stops: the controller fences the broker when its session
// expires.
func (l *Lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	l.stopped = true
	started := l.started
	l.mu.Unlock()
	close(l.stopCh)
	if !started {
		return nil
	}
	<-l.done
	if l.Epoch() == 0 {
		return nil
	}
	if err := l.f.ControlledShutdown(ctx, l.self.ID); err != nil {
		l.log.Warn("controlled shutdown failed", "broker", l.self.ID, "error", err)
		return err
	}
	l.log.Info("controlled shutdown done", "broker", l.self.ID)
	return nil
}

func (l *Lifecycle) run() {
	defer close(l.done)
	// Until registered, retry quickly (the quorum may still be electing
	// its first controller), backing off to the interval; then beat every
	// interval.
	failures := 0
	for {
		wait := l.interval
		if !l.beat() {
			failures++
			wait = registerBackoff(failures, l.interval, rand.Float64)
		} else {
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-l.stopCh:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// beatTimeout is how long a registration or heartbeat waits for the
// controller's answer: the interval, or half the session timeout when
// that is longer. A controller that answers slower than the interval (a
// loaded machine, a slow raft commit) still keeps the session; giving up
// after the interval, the broker would count none of its answers and
// think its session lost while the controller kept it.
func (l *Lifecycle) beatTimeout() time.Duration {
	return max(l.interval, l.session/2)
}

// beat registers when not registered, else heartbeats; a fenced or
// unknown answer makes the next beat register again. It reports whether
// the broker is registered and its heartbeat was answered.
func (l *Lifecycle) beat() bool {
	ctx, cancel := context.WithTimeout(context.Background(), l.beatTimeout())
	defer cancel()
	go func() {
		select {
		case <-l.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	epoch := l.Epoch()
	if epoch == 0 {
		e, err := l.f.RegisterBroker(ctx, l.self)
		if errors.Is(err, metadata.ErrUnsupportedVersion) {
			l.log.Error("cannot register broker: this node does not support the cluster's metadata.version; upgrade it",
				"broker", l.self.ID, "supported", l.self.MetadataVersions.String(), "error", err)
			return false
		}
		if err != nil {
			l.log.Warn("cannot register broker", "broker", l.self.ID, "error", err)
			return false
		}
		l.mu.Lock()
		first := l.epoch == 0 && !isClosed(l.registered)
		l.epoch, l.answered = e, time.Now()
		if first {
			close(l.registered)
		}
		l.mu.Unlock()
		l.log.Info("registered broker", "broker", l.self.ID, "epoch", e)
		epoch = e
	}
	index, err := l.f.Heartbeat(ctx, l.self.ID, l.self.Incarnation, epoch, l.self.MaxPartitions)
	switch {
	case err == nil:
		l.markAnswered(index)
		return true
	case errors.Is(err, metadata.ErrFencedBroker), errors.Is(err, metadata.ErrUnknownBroker):
		l.log.Warn("broker session lost, registering again", "broker", l.self.ID, "epoch", epoch, "error", err)
		l.mu.Lock()
		l.epoch = 0
		l.mu.Unlock()
		return false
	default:
		l.log.Debug("heartbeat failed", "broker", l.self.ID, "error", err)
		return true // registered; the next beat tries again on time
	}
}

// registerBackoffBase is the wait after a first failed registration.
const registerBackoffBase = 50 * time.Millisecond

// registerBackoff is the wait before the next registration after failures
// (1 or more) failed in a row: registerBackoffBase doubled per failure up
// to limit (the heartbeat interval), then up to a fifth less at random
// (jitter, rnd in [0, 1)), so that brokers refused together do not retry
// in step. It never exceeds limit, never overflows however many failures
// there were, and is never below 0.8 × min(registerBackoffBase, limit).
func registerBackoff(failures int, limit time.Duration, rnd func() float64) time.Duration {
	if limit <= 0 {
		limit = registerBackoffBase
	}
	d := min(registerBackoffBase, limit)
	// Doubling stops at the limit, so d never overflows.
	for i := 1; i < failures && d < limit; i++ {
		d = min(2*d, limit)
	}
	return d - time.Duration(rnd()*float64(d)/5)
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
