// Package txncoord is the transaction coordinator: it runs on the
// controller, where the transactions' state is (the metadata log's
// PutTransaction entries), and drives the state machine of package txn.
// Each transactional id is served under its own lock: the coordinator
// reads the id's state from the image, asks txn for the next one, writes
// it through the metadata log, and answers only once it is written. A
// transaction being ended (PrepareCommit, PrepareAbort) gets its markers
// written to each of its partitions' leaders (MarkerWriter) and then
// its complete state written; a transaction's commit also commits its
// staged consumer group offsets, in that same entry. A new controller
// finds any transaction a previous one left being ended in its image and
// completes it (RunTerm), and aborts the transactions past their timeout.
package txncoord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/internal/clock"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/txn"
)

// Log is the metadata log as the coordinator reads and writes it
// (metadata.GroupLog).
type Log interface {
	// Term is the leadership term of the running controller.
	Term() uint64
	// Barrier waits until every entry proposed before is applied here.
	Barrier(ctx context.Context) error
	// Image is this node's metadata image.
	Image() *metadata.Image
	// Apply writes cmd to the log and returns the FSM's answer.
	Apply(ctx context.Context, cmd *pb.Command) (any, error)
	// LevelRising tells which metadata.version cmd needs, and whether the
	// controller will raise the cluster to it on its own.
	LevelRising(cmd *pb.Command) (int32, bool)
}

// MarkerWriter writes a transaction's end markers: to every partition of
// m, through their leaders. It returns nil only once each partition's
// in-sync replicas have its marker (or the partition is gone); the
// coordinator retries it until then.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m txn.Marker) error
}

// Groups is the group coordinator as a transaction's offsets are checked
// against it (metadata.GroupLog): the member they are sent as must be in
// the group at its epoch and own each partition; none named, no check.
type Groups interface {
	ValidateTxnCommit(ctx context.Context, group string, member txn.Member, parts []txn.TopicPartition) error
}

// Config configures a Coordinator.
type Config struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: the longest timeout a
	// producer may ask for (0: DefaultMaxTimeoutMs).
	MaxTimeoutMs int32
	// CheckInterval is how often timed-out transactions are looked for
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms; 0:
	// DefaultCheckInterval).
	CheckInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms: how long an id
	// with no transaction in progress is kept after its last change
	// before it is forgotten (0: DefaultIDExpiration).
	IDExpiration time.Duration
	// WriteTimeout bounds one write of a state (0: 10s).
	WriteTimeout time.Duration
	// Clock is the coordinator's clock (nil: the system's).
	Clock clock.Clock
	// Logger logs its events (nil: none).
	Logger hclog.Logger
}

// Kafka's defaults.
const (
	DefaultMaxTimeoutMs  = 900000
	DefaultCheckInterval = 10 * time.Second
	DefaultIDExpiration  = 7 * 24 * time.Hour
)

// Coordinator is the transaction coordinator of one node
// (metadata.TxnCoordinator).
type Coordinator struct {
	log     Log
	markers MarkerWriter
	groups  Groups
	cfg     Config
	logger  hclog.Logger

	mu    sync.Mutex
	locks map[string]*idLock
	// barrierTerm is the term whose barrier has passed: the image holds
	// every state the previous controllers wrote.
	barrierTerm uint64
}

type idLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a coordinator over log and markers, checking the offsets
// sent to transactions against groups.
func New(log Log, markers MarkerWriter, groups Groups, cfg Config) *Coordinator {
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Coordinator{log: log, markers: markers, groups: groups, cfg: cfg, logger: logger, locks: map[string]*idLock{}}
}

// lock takes the lock of transactional id; the returned func releases it.
func (co *Coordinator) lock(id string) func() {
	co.mu.Lock()
	l := co.locks[id]
	if l == nil {
		l = &idLock{}
		co.locks[id] = l
	}
	l.refs++
	co.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		co.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(co.locks, id)
		}
		co.mu.Unlock()
	}
}

// current reads an id's state, after the term's barrier.
func (co *Coordinator) current(ctx context.Context, id string) (*txn.Txn, error) {
	term := co.log.Term()
	co.mu.Lock()
	passed := co.barrierTerm == term
	co.mu.Unlock()
	if !passed {
		if err := co.log.Barrier(ctx); err != nil {
			return nil, err
		}
		co.mu.Lock()
		co.barrierTerm = term
		co.mu.Unlock()
	}
	t, ok := co.log.Image().Transaction(id)
	if !ok {
		return nil, nil
	}
	return &t, nil
}

func (co *Coordinator) now() int64 { return co.cfg.Clock.Now().UnixMilli() }

// write stores t (allocating it a producer id with allocate) and returns
// it as stored.
func (co *Coordinator) write(ctx context.Context, t txn.Txn, allocate bool) (txn.Txn, error) {
	ctx, cancel := context.WithTimeout(ctx, co.cfg.WriteTimeout)
	defer cancel()
	cmd := &pb.Command{Cmd: &pb.Command_PutTransaction{PutTransaction: &pb.PutTransaction{
		Txn: metadata.TxnToPB(t), AllocateProducerId: allocate}}}
	resp, err := co.log.Apply(ctx, cmd)
	if err != nil {
		if level, rising := co.log.LevelRising(cmd); errors.Is(err, metadata.ErrUnsupportedVersion) && rising {
			// A new cluster before its controller raised the level: the
			// producer retries, and is served moments later.
			return txn.Txn{}, fmt.Errorf("%w: the cluster's metadata.version is below %d, which the controller raises once every voter has registered; retry",
				metadata.ErrNotCoordinator, level)
		}
		return txn.Txn{}, notCoordinator(err)
	}
	if err, ok := resp.(error); ok {
		return txn.Txn{}, err
	}
	stored, ok := resp.(txn.Txn)
	if !ok {
		return txn.Txn{}, fmt.Errorf("%w: PutTransaction answered %T", metadata.ErrNotCoordinator, resp)
	}
	return stored, nil
}

// remove deletes t's id from the metadata log (PutTransaction with
// remove). Callers hold the id's lock.
func (co *Coordinator) remove(ctx context.Context, t txn.Txn) error {
	ctx, cancel := context.WithTimeout(ctx, co.cfg.WriteTimeout)
	defer cancel()
	cmd := &pb.Command{Cmd: &pb.Command_PutTransaction{PutTransaction: &pb.PutTransaction{Txn: metadata.TxnToPB(t), Remove: true}}}
	resp, err := co.log.Apply(ctx, cmd)
	if err != nil {
		return notCoordinator(err)
	}
	if err, ok := resp.(error); ok {
		return err
	}
	return nil
}

// notCoordinator makes a write that failed for want of a controller
// retriable for the producer.
func notCoordinator(err error) error {
	if errors.Is(err, metadata.ErrNotController) || errors.Is(err, metadata.ErrNoQuorum) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", metadata.ErrNotCoordinator, err)
	}
	return err
}

// InitProducer is a transactional producer's InitProducerId. Over an
// ongoing transaction it fences the old producer, aborts the transaction
// and answers txn.ErrConcurrentTransactions once that is done: the
// producer retries and gets the bumped epoch.
func (co *Coordinator) InitProducer(ctx context.Context, req txn.InitRequest) (txn.Txn, error) {
	if err := txn.CheckID(req.ID); err != nil {
		return txn.Txn{}, err
	}
	defer co.lock(req.ID)()
	cur, err := co.current(ctx, req.ID)
	if err != nil {
		return txn.Txn{}, err
	}
	req.NowMs = co.now()
	res, err := txn.Init(cur, req, co.cfg.MaxTimeoutMs)
	if err != nil {
		return txn.Txn{}, err
	}
	if res.Unchanged {
		return res.Next, nil
	}
	if res.Aborting {
		if err := co.prepareAndComplete(ctx, res.Next); err != nil {
			return txn.Txn{}, err
		}
		return txn.Txn{}, fmt.Errorf("%w: the ongoing transaction of %q was aborted; retry", txn.ErrConcurrentTransactions, req.ID)
	}
	stored, err := co.write(ctx, res.Next, res.AllocateID)
	if err != nil {
		return txn.Txn{}, err
	}
	co.logger.Debug("transactional producer initialized", "transactional_id", req.ID, "producer_id", stored.ProducerID, "epoch", stored.ProducerEpoch)
	return stored, nil
}

// AddPartitions adds partitions to the producer's transaction. A
// partition the cluster does not have is refused.
func (co *Coordinator) AddPartitions(ctx context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) error {
	img := co.log.Image()
	for _, tp := range parts {
		t, ok := img.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s-%d", metadata.ErrUnknownTopic, tp.Topic, tp.Partition)
		}
	}
	defer co.lock(p.ID)()
	cur, err := co.current(ctx, p.ID)
	if err != nil {
		return err
	}
	next, err := txn.AddPartitions(cur, p.PID, p.Epoch, parts, verifyOnly, co.now())
	if err != nil || next == nil {
		return err
	}
	_, err = co.write(ctx, *next, false)
	return err
}

// AddGroup adds a consumer group to the producer's transaction.
func (co *Coordinator) AddGroup(ctx context.Context, p txn.Producer, group string) error {
	if err := metadata.ValidateGroupID(group); err != nil {
		return err
	}
	defer co.lock(p.ID)()
	cur, err := co.current(ctx, p.ID)
	if err != nil {
		return err
	}
	next, err := txn.AddGroup(cur, p.PID, p.Epoch, group, co.now())
	if err != nil || next == nil {
		return err
	}
	_, err = co.write(ctx, *next, false)
	return err
}

// CommitOffsets stages a group's offsets in the producer's transaction,
// checked as an offset commit is (the group id, the partitions, the
// offsets) and, sent as a member, against the group's membership (the
// member at its epoch, owning each partition: Groups).
func (co *Coordinator) CommitOffsets(ctx context.Context, p txn.Producer, group string, member txn.Member, offsets []txn.Offset, addGroup bool) error {
	check := make([]metadata.OffsetCommit, len(offsets))
	parts := make([]txn.TopicPartition, len(offsets))
	for i, o := range offsets {
		check[i] = metadata.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
		parts[i] = txn.TopicPartition{Topic: o.Topic, Partition: o.Partition}
	}
	if err := metadata.ValidateOffsetCommit(co.log.Image(), group, check); err != nil {
		return err
	}
	if err := co.groups.ValidateTxnCommit(ctx, group, member, parts); err != nil {
		return err
	}
	defer co.lock(p.ID)()
	cur, err := co.current(ctx, p.ID)
	if err != nil {
		return err
	}
	next, err := txn.CommitOffsets(cur, p.PID, p.Epoch, group, offsets, addGroup, co.now())
	if err != nil {
		return err
	}
	_, err = co.write(ctx, *next, false)
	return err
}

// End commits or aborts the producer's transaction. It answers once the
// decision is written (the prepare state); it then writes the markers
// and the complete state before answering when it can, and otherwise
// leaves them to RunTerm (the producer's next transaction waits for it:
// txn.ErrConcurrentTransactions).
//
// An End that exhausts the epoch (txn.Exhausted: the transaction was at
// txn.MaxEpoch under version 2) answers only once its markers are
// written, with a new producer id at epoch 0 allocated then: the
// producer goes on with it, so the next transaction's batches never
// carry the (producer id, epoch) of the one whose markers may still be
// on their way. Until the markers are written it answers
// txn.ErrConcurrentTransactions, and the producer's retry (at the epoch
// before the bump) gets the new id once they are.
func (co *Coordinator) End(ctx context.Context, p txn.Producer, commit, bump bool) (txn.Txn, error) {
	defer co.lock(p.ID)()
	cur, err := co.current(ctx, p.ID)
	if err != nil {
		return txn.Txn{}, err
	}
	res, err := txn.End(cur, p.PID, p.Epoch, commit, bump, co.now())
	if errors.Is(err, txn.ErrConcurrentTransactions) && endingExhausted(cur, p, commit) {
		// The retry of an End whose markers were not all written: try
		// them again now rather than wait for the next sweep.
		done, cerr := co.complete(ctx, *cur)
		if cerr != nil {
			return txn.Txn{}, err
		}
		return co.newProducerID(ctx, done)
	}
	if err != nil {
		return txn.Txn{}, err
	}
	if res.Done {
		if res.Current.BumpEpoch && txn.Exhausted(res.Current) {
			return co.newProducerID(ctx, res.Current)
		}
		return res.Current, nil
	}
	prep, err := co.prepare(ctx, *res.Next)
	if err != nil {
		return txn.Txn{}, err
	}
	done, err := co.complete(ctx, prep)
	if err != nil {
		co.logger.Warn("transaction decided, its markers not yet written; retrying in the background",
			"transactional_id", p.ID, "commit", commit, "error", err)
		if txn.Exhausted(prep) {
			return txn.Txn{}, fmt.Errorf("%w: the transaction of %q is decided, its markers not yet written; retry for the new producer id",
				txn.ErrConcurrentTransactions, p.ID)
		}
		return prep, nil
	}
	if txn.Exhausted(done) {
		return co.newProducerID(ctx, done)
	}
	return prep, nil
}

// endingExhausted reports whether cur is the prepare state, at an
// exhausted epoch, of p's End retried (p at the epoch before the bump).
func endingExhausted(cur *txn.Txn, p txn.Producer, commit bool) bool {
	return cur != nil && cur.State.Preparing() && txn.Exhausted(*cur) && cur.BumpEpoch &&
		p.PID == cur.ProducerID && p.Epoch == cur.LastProducerEpoch && (cur.State == txn.PrepareCommit) == commit
}

// newProducerID gives a complete state whose epoch is exhausted a new
// producer id at epoch 0, and returns it as stored. Callers hold the
// id's lock.
func (co *Coordinator) newProducerID(ctx context.Context, t txn.Txn) (txn.Txn, error) {
	stored, err := co.write(ctx, t, true)
	if err != nil {
		return txn.Txn{}, err
	}
	co.logger.Debug("producer epoch exhausted: a new producer id", "transactional_id", t.ID,
		"old_producer_id", t.ProducerID, "producer_id", stored.ProducerID)
	return stored, nil
}

// prepare writes a prepare state stamped with this term as its
// coordinator epoch.
func (co *Coordinator) prepare(ctx context.Context, t txn.Txn) (txn.Txn, error) {
	t.CoordinatorEpoch = int32(co.log.Term())
	return co.write(ctx, t, false)
}

// prepareAndComplete writes a prepare state and completes it.
func (co *Coordinator) prepareAndComplete(ctx context.Context, t txn.Txn) error {
	prep, err := co.prepare(ctx, t)
	if err != nil {
		return err
	}
	_, err = co.complete(ctx, prep)
	return err
}

// complete writes a prepare state's markers, then its complete state,
// and returns it as stored. A complete state whose epoch is exhausted
// keeps its producer id: the producer's End (or its retry) gets the new
// one (newProducerID), or its next Init. Callers hold the id's lock.
func (co *Coordinator) complete(ctx context.Context, t txn.Txn) (txn.Txn, error) {
	m, ok := txn.Markers(t)
	if !ok {
		return t, nil
	}
	// This term's epoch, whichever term wrote the prepare state: the
	// partitions refuse markers of an older coordinator epoch only.
	m.CoordinatorEpoch = int32(co.log.Term())
	if len(m.Partitions) > 0 {
		if err := co.markers.WriteMarkers(ctx, m); err != nil {
			return txn.Txn{}, err
		}
	}
	done, err := txn.Complete(t, co.now())
	if err != nil {
		return txn.Txn{}, err
	}
	stored, err := co.write(ctx, done, false)
	if err != nil {
		return txn.Txn{}, err
	}
	co.logger.Debug("transaction ended", "transactional_id", t.ID, "state", stored.State, "producer_id", stored.ProducerID, "epoch", stored.ProducerEpoch)
	return stored, nil
}

// RunTerm completes, for one leadership term, the transactions left
// being ended, and aborts those past their timeout, every CheckInterval
// until ctx ends.
func (co *Coordinator) RunTerm(ctx context.Context) {
	tick := time.NewTicker(co.cfg.CheckInterval)
	defer tick.Stop()
	first := true
	for {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		first = false
		if err := co.log.Barrier(ctx); err != nil {
			continue
		}
		co.sweep(ctx)
	}
}

// sweep completes or aborts what needs it now, and forgets the
// transactional ids idle past IDExpiration.
func (co *Coordinator) sweep(ctx context.Context) {
	now := co.now()
	for _, t := range co.log.Image().Transactions() {
		if ctx.Err() != nil {
			return
		}
		_, expired := txn.Expired(t, now)
		if !t.State.Preparing() && !expired && !txn.IDExpired(t, now, co.cfg.IDExpiration.Milliseconds()) {
			continue
		}
		co.settle(ctx, t.ID)
	}
}

// settle completes an id's prepare state, aborts its expired
// transaction, or forgets an id idle past IDExpiration, under its lock.
func (co *Coordinator) settle(ctx context.Context, id string) {
	defer co.lock(id)()
	cur, err := co.current(ctx, id)
	if err != nil || cur == nil {
		return
	}
	now := co.now()
	switch next, expired := txn.Expired(*cur, now); {
	case cur.State.Preparing():
		_, err = co.complete(ctx, *cur)
	case expired:
		co.logger.Info("aborting a transaction past its timeout", "transactional_id", id, "producer_id", cur.ProducerID,
			"timeout_ms", cur.TimeoutMs)
		err = co.prepareAndComplete(ctx, next)
	case txn.IDExpired(*cur, now, co.cfg.IDExpiration.Milliseconds()):
		co.logger.Info("forgetting a transactional id idle past transactional.id.expiration.ms", "transactional_id", id,
			"producer_id", cur.ProducerID, "idle_ms", now-cur.UpdateMs)
		err = co.remove(ctx, *cur)
	}
	if err != nil {
		co.logger.Warn("cannot end transaction yet", "transactional_id", id, "error", err)
	}
}
