package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/storage"
)

// The follower's side of replication: one fetcher per leader broker pulls
// every partition this broker follows from that leader in one
// ReplicaFetch call, appends what comes back and follows the leader's HW.
// The replica manager moves partitions between fetchers as leadership
// changes in the metadata image.

// fetcherManager runs the fetchers.
type fetcherManager struct {
	self        int32
	incarnation string // this process's, as registered
	cfg         FetchConfig
	peers       Peers
	bytesIn     *atomic.Uint64 // batch bytes the fetches brought (Manager.Stats)
	logger      hclog.Logger

	// throttle bounds what the replicas being added here fetch.
	throttle throttle

	mu       sync.Mutex
	fetchers map[int32]*fetcher // by leader
	where    map[*Partition]int32
	stopped  bool
	wg       sync.WaitGroup
}

// followed is a partition a fetcher pulls, at the leader epoch it follows.
type followed struct {
	part        *Partition
	epoch       int32
	pausedUntil time.Time // after an error the leader answered for it
	refusals    int       // leadership refusals in a row (see pause)
}

type fetcher struct {
	m      *fetcherManager
	leader int32

	mu     sync.Mutex
	parts  map[*Partition]*followed
	order  []*followed        // parts, in the order they came: each fetch names them so
	cancel context.CancelFunc // of the call in flight, to restart it when parts change
	wake   chan struct{}
	stop   chan struct{}

	session FetchSession // used by run's goroutine only
	// The last fetch's partitions, reused by the next (a fetch is over,
	// answer applied, before run's goroutine builds the next); handed
	// over under mu.
	reqParts []FetchPartition
	pending  []pending
}

func newFetcherManager(self int32, incarnation string, cfg FetchConfig, peers Peers, bytesIn *atomic.Uint64, logger hclog.Logger) *fetcherManager {
	return &fetcherManager{self: self, incarnation: incarnation, cfg: cfg, peers: peers, bytesIn: bytesIn, logger: logger,
		fetchers: map[int32]*fetcher{}, where: map[*Partition]int32{}}
}

// follow makes the fetcher of leader pull part at epoch (and no other
// fetcher pull it). A negative leader only stops fetching it.
func (m *fetcherManager) follow(part *Partition, leader, epoch int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	if cur, ok := m.where[part]; ok {
		f := m.fetchers[cur]
		if cur == leader {
			f.set(part, epoch)
			return
		}
		m.removeLocked(part)
	}
	if leader < 0 || leader == m.self {
		return
	}
	f, ok := m.fetchers[leader]
	if !ok {
		f = &fetcher{m: m, leader: leader, parts: map[*Partition]*followed{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		m.fetchers[leader] = f
		m.wg.Add(1)
		go f.run()
	}
	m.where[part] = leader
	f.set(part, epoch)
}

// unfollow stops fetching part.
func (m *fetcherManager) unfollow(part *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(part)
}

func (m *fetcherManager) removeLocked(part *Partition) {
	cur, ok := m.where[part]
	if !ok {
		return
	}
	delete(m.where, part)
	f := m.fetchers[cur]
	if f.remove(part) == 0 {
		delete(m.fetchers, cur)
		close(f.stop)
		f.interrupt()
	}
}

// stopAll stops every fetcher and waits for them.
func (m *fetcherManager) stopAll() {
	m.mu.Lock()
	m.stopped = true
	for id, f := range m.fetchers {
		close(f.stop)
		f.interrupt()
		delete(m.fetchers, id)
	}
	m.where = map[*Partition]int32{}
	m.mu.Unlock()
	m.wg.Wait()
}

func (f *fetcher) set(part *Partition, epoch int32) {
	f.mu.Lock()
	cur, ok := f.parts[part]
	switch {
	case ok && cur.epoch == epoch:
		f.mu.Unlock()
		return
	case ok:
		*cur = followed{part: part, epoch: epoch}
	default:
		cur = &followed{part: part, epoch: epoch}
		f.parts[part] = cur
		f.order = append(f.order, cur)
	}
	f.mu.Unlock()
	f.interrupt()
}

func (f *fetcher) remove(part *Partition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.parts[part]; ok {
		delete(f.parts, part)
		f.order = slices.DeleteFunc(f.order, func(o *followed) bool { return o == st })
	}
	return len(f.parts)
}

// interrupt ends the call in flight (a long poll) so that the next one
// names the new set of partitions.
func (f *fetcher) interrupt() {
	f.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// pending is one partition of a fetch being built.
type pending struct {
	part      *Partition
	epoch     int32 // leader epoch followed at
	offset    int64
	lastEpoch int32 // of the last batch below offset
	failed    bool  // the log has failed: tell the leader, take nothing
	throttled bool  // being added by a reassignment: counts in the throttle
}

func (f *fetcher) run() {
	defer f.m.wg.Done()
	f.session = openFetchSession(f.m.peers, f.leader)
	defer f.session.Close()
	failing := false
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		req, parts, next := f.request(time.Now())
		if len(parts) == 0 {
			f.sleep(next)
			continue
		}
		began := time.Now()
		resp, err := f.call(req)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				// Once per outage at warn level, then at debug.
				if !failing {
					f.m.logger.Warn("replica fetch failed; retrying", "leader", f.leader, "partitions", len(parts), "error", err)
				} else {
					f.m.logger.Debug("replica fetch failed", "leader", f.leader, "error", err)
				}
				failing = true
				// Failed fetches start at least the backoff apart. A call
				// that waited that long already (on a connection being
				// re-established, see Peers) goes again at once, so a
				// link that comes back is used as soon as it is up.
				if wait := f.m.cfg.Backoff - time.Since(began); wait > 0 {
					f.sleep(wait)
				}
			}
			continue
		}
		if failing {
			f.m.logger.Info("replica fetch works again", "leader", f.leader)
			failing = false
		}
		var n int
		for i := range resp.Partitions {
			n += len(resp.Partitions[i].Records)
		}
		f.m.bytesIn.Add(uint64(n))
		f.apply(parts, resp.Partitions)
		resp.done()
	}
}

// request builds the next fetch from the partitions not paused; next is
// how long until a paused one is due, when every one is. It picks the
// partitions under fetcher.mu and reads their state (which takes
// Partition.mu, above fetcher.mu in docs/locking.md's order) after
// releasing it.
func (f *fetcher) request(now time.Time) (*FetchRequest, []pending, time.Duration) {
	cfg := f.m.cfg
	req := &FetchRequest{ReplicaID: f.m.self, Incarnation: f.m.incarnation, MaxWaitMs: int32(cfg.MaxWait.Milliseconds()),
		MinBytes: cfg.MinBytes, MaxBytes: cfg.ResponseMax}
	next := cfg.Backoff
	paused := false
	f.mu.Lock()
	// The last fetch's buffers are taken under mu (and given back under
	// it), so that two callers never share them.
	clear(f.pending) // no partition kept past its fetch
	parts := f.pending[:0]
	req.Partitions = f.reqParts[:0]
	f.pending, f.reqParts = nil, nil
	defer func() {
		f.mu.Lock()
		f.pending, f.reqParts = parts, req.Partitions
		f.mu.Unlock()
	}()
	for _, st := range f.order {
		if wait := st.pausedUntil.Sub(now); wait > 0 {
			next = min(next, wait)
			paused = true
			continue
		}
		parts = append(parts, pending{part: st.part, epoch: st.epoch})
	}
	f.mu.Unlock()
	// Partitions being added by a reassignment share the throttle's
	// allowance; with none left they wait for it like a paused one.
	allow, throttledWait := int32(-1), time.Duration(0)
	kept := parts[:0]
	for _, pp := range parts {
		if pp.part.reassigning.Load() {
			if allow < 0 {
				allow, throttledWait = f.m.throttle.allowance(now, cfg.PartitionMax)
			}
			if allow == 0 {
				next = min(next, throttledWait)
				paused = true
				continue
			}
			pp.throttled = true
		}
		kept = append(kept, pp)
	}
	clear(parts[len(kept):])
	parts = kept
	for i := range parts {
		pp := &parts[i]
		part := pp.part
		pp.offset, pp.lastEpoch = part.log.LogEndOffset(), part.lastFetchedEpoch()
		_, failed := part.LogFailure()
		pp.failed = failed != nil
		fp := FetchPartition{Topic: part.topic, Partition: part.id, CurrentLeaderEpoch: pp.epoch,
			FetchOffset: pp.offset, LastFetchedEpoch: pp.lastEpoch, PartitionMaxBytes: cfg.PartitionMax, LogFailed: pp.failed,
			LogStartOffset: part.log.LogStartOffset()}
		if pp.throttled {
			fp.PartitionMaxBytes = allow
		}
		if pp.failed {
			fp.PartitionMaxBytes = 0
		}
		req.Partitions = append(req.Partitions, fp)
	}
	if paused && len(parts) > 0 {
		// The long poll of the others must not hold back a paused
		// partition past its retry: it ends when that one is due.
		req.MaxWaitMs = min(req.MaxWaitMs, int32(max(next.Milliseconds(), 1)))
	}
	return req, parts, next
}

// call sends the fetch to the leader; interrupt or stop cancels it.
func (f *fetcher) call(req *FetchRequest) (*FetchResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.m.cfg.MaxWait+f.m.cfg.CallTimeoutSlop)
	defer cancel()
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.cancel = nil
		f.mu.Unlock()
	}()
	select {
	case <-f.stop:
		return nil, context.Canceled
	case <-f.wake:
		return nil, context.Canceled // the partitions changed: rebuild
	default:
	}
	resp, err := f.session.Fetch(ctx, req)
	if err != nil {
		if ctx.Err() == context.Canceled {
			return nil, context.Canceled
		}
		return nil, err
	}
	// Checked here for any Peers: a session checks its whole answers
	// too, and fills in an incremental one to a whole.
	if err := answersAll(req, resp); err != nil {
		resp.done()
		return nil, fmt.Errorf("leader %d: %w", f.leader, err)
	}
	return resp, nil
}

// apply hands each partition's answer to its replica.
func (f *fetcher) apply(parts []pending, results []FetchResult) {
	for i, r := range results {
		pp := parts[i]
		if pp.failed || r.Unchanged {
			continue
		}
		in := fromLeader{leaderEpoch: pp.epoch, fetchOffset: pp.offset, records: r.Records, diverging: r.Diverging,
			highWatermark: r.HighWatermark, logStartOffset: r.LogStartOffset, logEndOffset: r.LogEndOffset,
			outOfRange: errors.Is(r.Err, storage.ErrOffsetOutOfRange)}
		if r.Err != nil && !in.outOfRange {
			// Not (or no longer) the leader at our epoch, or a storage
			// error there: wait for the metadata to move us, or retry.
			f.m.logger.Debug("replica fetch refused", "leader", f.leader, "topic", pp.part.topic, "partition", pp.part.id,
				"error", r.Err)
			if leadershipRefusal(r.Err) {
				f.pauseRefused(pp.part, pp.epoch)
			} else {
				f.pause(pp.part, pp.epoch)
			}
			continue
		}
		f.accepted(pp.part, pp.epoch)
		if pp.throttled {
			f.m.throttle.take(len(r.Records), time.Now())
		}
		if _, err := pp.part.applyFromLeader(in); err != nil {
			f.m.logger.Warn("cannot apply replica fetch", "leader", f.leader, "topic", pp.part.topic, "partition", pp.part.id, "error", err)
			f.pause(pp.part, pp.epoch)
			continue
		}
		if in.diverging != nil && pp.part.log.LogEndOffset() == pp.offset && pp.part.lastFetchedEpoch() == pp.lastEpoch {
			// The divergence moved nothing (the leader lacks the epoch it
			// leads at): do not ask again at once.
			f.m.logger.Warn("replica fetch diverges without progress", "leader", f.leader, "topic", pp.part.topic, "partition", pp.part.id,
				"log_end_offset", pp.offset, "diverging_epoch", in.diverging.Epoch, "diverging_end_offset", in.diverging.EndOffset)
			f.pause(pp.part, pp.epoch)
		}
	}
}

func (f *fetcher) pause(part *Partition, epoch int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.parts[part]; ok && st.epoch == epoch {
		st.pausedUntil = time.Now().Add(f.m.cfg.Backoff)
	}
}

// refusalRetryBase is the first wait after a leadership refusal; each one
// in a row doubles it, up to replica.fetch.backoff.ms.
const refusalRetryBase = 5 * time.Millisecond

// pauseRefused holds back a partition whose leader refused it for
// leadership: most often a leader that has not yet applied the metadata
// this follower acts on (a topic just created, an election just made), so
// it is asked again within milliseconds, and less often while the refusals
// go on (the follower's own image may be the one behind). Waiting the
// whole replica.fetch.backoff.ms would hold a new partition's HW, and so
// its acks=all produces and its consumers, for that long.
func (f *fetcher) pauseRefused(part *Partition, epoch int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.parts[part]; ok && st.epoch == epoch {
		wait := min(refusalRetryBase<<min(st.refusals, 16), f.m.cfg.Backoff)
		st.refusals++
		st.pausedUntil = time.Now().Add(wait)
	}
}

// accepted resets the refusals of a partition the leader answered.
func (f *fetcher) accepted(part *Partition, epoch int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.parts[part]; ok && st.epoch == epoch {
		st.refusals = 0
	}
}

// LeadershipRefusals are the errors of a leader refusing a partition's
// fetch because the two brokers' views of its leadership differ: a
// follower asks again at once (with a short backoff), not after the
// backoff of a failing leader. A transport keeps them as they are (the
// broker maps their codes back to these).
var LeadershipRefusals = []error{ErrNotLeader, ErrLeaderNotAvailable, ErrUnknownTopicOrPartition, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch}

// leadershipRefusal reports whether err is one of LeadershipRefusals.
func leadershipRefusal(err error) bool {
	for _, e := range LeadershipRefusals {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sleep waits d, or less if woken or stopped.
func (f *fetcher) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.wake:
	case <-f.stop:
	}
}
