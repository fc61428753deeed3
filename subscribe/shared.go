package subscribe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
)

// A SHARED Subscribe stream: the broker is a share group member on the
// stream's behalf (docs/share-groups.md). Its heartbeats, fetches and
// acknowledgements are the core's share operations (ShareCore), as the
// Kafka listener's are. One goroutine (the loop) owns the member's state:
// its assignment and the records it holds with their lock deadlines;
// one goroutine reads the client's messages, and each heartbeat and each
// fetch runs in a goroutine of its own, at most one of each at a time.
// Acknowledgements are applied in the loop, each range checked against
// what the stream holds first, so that a range naming records the stream
// does not hold is refused alone and the stream goes on. When the stream
// ends, for whatever reason, the member leaves: what it held is released
// at once.

// ShareCore is the request core as a SHARED stream's member uses it.
// *request.Core is one.
type ShareCore interface {
	// ShareGroupHeartbeat: Read on the group, Describe on its topics.
	ShareGroupHeartbeat(ctx context.Context, hb *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error)
	// ShareFetch: Read on the group and the topics.
	ShareFetch(ctx context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error)
	// ShareAcknowledge: Read on the group and the topics.
	ShareAcknowledge(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error)
	// ShareAcknowledgeRouted is ShareAcknowledge at each partition's
	// leader, wherever it is.
	// keyOrdered: the stream is key_ordered.
	ShareAcknowledgeRouted(ctx context.Context, group, member string, keyOrdered bool, parts []request.SharePartition) ([]request.ShareAckResult, error)
	// ShareLockDuration is how long the group's records stay locked.
	ShareLockDuration(group string) time.Duration
	// ShareGroupRequireKeyOrdering turns the group's per-key ordering on,
	// or refuses when it delivers without it already.
	ShareGroupRequireKeyOrdering(ctx context.Context, group string) error
	// DeniedTopics is, of names, those the principal may not do op on,
	// each with the core's refusal.
	DeniedTopics(ctx context.Context, op auth.Operation, names []string) map[string]error
}

var _ ShareCore = (*request.Core)(nil)

const (
	// sharedFetchWait is each share fetch's long poll: a record released
	// by another member is handed out at the next fetch at the latest.
	sharedFetchWait = 500 * time.Millisecond
	// sharedPartitionRetry is how long a partition whose fetch failed
	// (not led here, say) is left out of fetches.
	sharedPartitionRetry = time.Second
)

// checkMode refuses a start whose mode is unknown, or that sets a
// SHARED-only field without SHARED.
func checkMode(st *quirev1.SubscribeStart) error {
	switch st.Mode {
	case quirev1.SubscribeMode_CONSUMER_GROUP:
		if st.KeyOrdered {
			return fmt.Errorf("%w: key_ordered is for SHARED streams (a consumer group orders each partition already)", ErrInvalidRequest)
		}
	case quirev1.SubscribeMode_SHARED:
	default:
		return fmt.Errorf("%w: unknown Subscribe mode %d (want CONSUMER_GROUP or SHARED)", ErrInvalidRequest, st.Mode)
	}
	return nil
}

// sharedLock is a record the stream holds, with when its lock runs out.
type sharedLock struct {
	deadline time.Time
}

type sharedStream struct {
	core   ShareCore
	b      Broker
	stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse]
	start  *quirev1.SubscribeStart
	ctx    context.Context
	log    hclog.Logger

	memberID   string
	epoch      int32
	interval   time.Duration
	maxRecords int
	lockFor    time.Duration

	parts   []partKey // the assignment, sorted
	retryAt map[partKey]time.Time
	// held is, per partition, the records the stream holds by offset;
	// nHeld their number, nextExpiry the first of their deadlines.
	held       map[partKey]map[int64]sharedLock
	nHeld      int
	nextExpiry time.Time

	hbInFlight bool
	// rejoining: the group forgot the member; only the answer to a join
	// (epoch 0) counts until it has joined again.
	rejoining bool
	hbAt      time.Time
	hbDone    chan sharedHB
	fetchStop context.CancelFunc
	fetchDone chan sharedFetched
}

type sharedHB struct {
	resp *request.ShareHeartbeatResult
	err  error
	join bool // sent with epoch 0
}

type sharedFetched struct {
	results []request.ShareFetchResult
	err     error
	at      time.Time // when the fetch was sent: its locks run from about then
}

// serveShared runs a SHARED stream's member; Serve calls it after the
// start.
func serveShared(ctx context.Context, core ShareCore, b Broker, stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse], st *quirev1.SubscribeStart) error {
	s, err := newSharedStream(core, b, stream, st)
	if err != nil {
		return b.Status(err)
	}
	if err := firstDenied(core.DeniedTopics(ctx, auth.OpRead, st.Subscription.Topics), st.Subscription.Topics); err != nil {
		return b.Status(fmt.Errorf("subscribe to share group %q: %w", st.Group, err))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.Closing():
			cancel()
		case <-ctx.Done():
		}
	}()
	s.ctx = ctx
	return s.run()
}

func newSharedStream(core ShareCore, b Broker, stream grpc.BidiStreamingServer[quirev1.SubscribeRequest, quirev1.SubscribeResponse], st *quirev1.SubscribeStart) (*sharedStream, error) {
	switch {
	case st.Group == "":
		return nil, fmt.Errorf("%w: a SHARED Subscribe start needs a group", ErrInvalidRequest)
	case st.Subscription == nil || len(st.Subscription.Topics) == 0:
		return nil, fmt.Errorf("%w: a SHARED Subscribe start needs subscription.topics", ErrInvalidRequest)
	case st.Subscription.Regex != "":
		return nil, fmt.Errorf("%w: a SHARED stream names its topics: subscription.regex is for consumer groups", ErrInvalidRequest)
	case st.Assignor != "", st.AutoOffsetReset != "", st.InstanceId != "", st.RawBatches, st.CommitIntervalMs != 0:
		return nil, fmt.Errorf("%w: assignor, auto_offset_reset, instance_id, raw_batches and commit_interval_ms are for consumer groups, not SHARED streams", ErrInvalidRequest)
	case st.MaxOutstandingRecords < 0:
		return nil, fmt.Errorf("%w: negative max_outstanding_records %d", ErrInvalidRequest, st.MaxOutstandingRecords)
	}
	if err := wire.CheckFormat(st.Format); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("subscribe: member id: %w", err)
	}
	s := &sharedStream{core: core, b: b, stream: stream, start: st, memberID: hex.EncodeToString(id[:]),
		maxRecords: subscribeDefaultRecords, retryAt: map[partKey]time.Time{}, held: map[partKey]map[int64]sharedLock{},
		hbDone: make(chan sharedHB, 1), fetchDone: make(chan sharedFetched, 1)}
	if st.MaxOutstandingRecords > 0 {
		s.maxRecords = int(st.MaxOutstandingRecords)
	}
	s.log = b.Logger().With("group", st.Group, "member", s.memberID)
	return s, nil
}

func (s *sharedStream) run() error {
	if s.start.KeyOrdered {
		ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
		err := s.core.ShareGroupRequireKeyOrdering(ctx, s.start.Group)
		cancel()
		if err != nil {
			return s.b.Status(fmt.Errorf("subscribe to share group %q: %w", s.start.Group, err))
		}
	}
	s.lockFor = s.core.ShareLockDuration(s.start.Group)
	ctx, cancel := context.WithTimeout(s.ctx, subscribeCallTimeout)
	resp, err := s.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: s.start.Group, MemberID: s.memberID, Topics: slices.Clone(s.start.Subscription.Topics)})
	cancel()
	if err != nil {
		return s.b.Status(fmt.Errorf("subscribe to share group %q: %w", s.start.Group, err))
	}
	s.log.Debug("shared subscribe stream joined", "epoch", resp.Epoch)
	if err := s.onHeartbeat(resp, nil); err != nil {
		return s.finish(statusOf(err))
	}

	recv := make(chan recvResult)
	go func() {
		for {
			m, err := s.stream.Recv()
			select {
			case recv <- recvResult{m, err}:
			case <-s.ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	for {
		now := time.Now()
		s.expire(now)
		if !s.hbInFlight && !now.Before(s.hbAt) {
			s.spawnHeartbeat()
		}
		s.maybeFetch(now)
		wake := now.Add(time.Minute)
		if !s.hbInFlight {
			wake = s.hbAt
		}
		if !s.nextExpiry.IsZero() {
			wake = minTime(wake, s.nextExpiry)
		}
		for _, at := range s.retryAt {
			if at.After(now) { // one past waits for the fetch in flight, or the credit
				wake = minTime(wake, at)
			}
		}
		timer := time.NewTimer(max(time.Until(wake), time.Millisecond))
		select {
		case <-s.ctx.Done():
			timer.Stop()
			if s.stopping() {
				return s.finish(s.b.Status(s.b.ShuttingDown()))
			}
			return s.finish(nil) // the stream broke
		case r := <-recv:
			timer.Stop()
			if errors.Is(r.err, io.EOF) {
				return s.finish(nil) // closed cleanly
			}
			if malformed(r.err) {
				return s.finish(r.err)
			}
			if r.err != nil {
				return s.finish(nil)
			}
			acks := r.msg.GetShareAcks()
			if acks == nil {
				return s.finish(s.b.Status(fmt.Errorf("%w: later messages of a SHARED Subscribe stream are share_acks", ErrInvalidRequest)))
			}
			if err := s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_ShareAckResults{ShareAckResults: s.acknowledge(acks)}}); err != nil {
				return s.finish(nil)
			}
		case h := <-s.hbDone:
			timer.Stop()
			s.hbInFlight = false
			if s.rejoining && !h.join {
				s.hbAt = time.Now() // sent before: join now
				continue
			}
			if err := s.onHeartbeat(h.resp, h.err); err != nil {
				return s.finish(statusOf(err))
			}
		case f := <-s.fetchDone:
			timer.Stop()
			s.fetchStop() // its context's resources
			s.fetchStop = nil
			if err := s.onFetch(f); err != nil {
				return s.finish(statusOf(err))
			}
		case <-timer.C:
		}
	}
}

func (s *sharedStream) stopping() bool {
	select {
	case <-s.b.Closing():
		return true
	default:
		return false
	}
}

// finish waits for the calls in flight, then leaves the group, so that
// every record the member holds is released at once, and returns err,
// the stream's status.
func (s *sharedStream) finish(err error) error {
	if s.fetchStop != nil {
		s.fetchStop()
		<-s.fetchDone // an acquisition must not land after the leave
	}
	if s.hbInFlight {
		if h := <-s.hbDone; h.err == nil && h.resp.Epoch > 0 {
			s.epoch = h.resp.Epoch
		}
	}
	if s.epoch > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), subscribeCallTimeout)
		defer cancel()
		if _, lerr := s.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: s.start.Group, MemberID: s.memberID, Epoch: -1}); lerr != nil {
			s.log.Warn("shared subscribe stream could not leave its group", "error", lerr)
		}
	}
	s.log.Debug("shared subscribe stream ended", "held", s.nHeld, "error", err)
	return err
}

func (s *sharedStream) spawnHeartbeat() {
	hb := &request.ShareHeartbeat{Group: s.start.Group, MemberID: s.memberID, Epoch: s.epoch}
	if s.epoch == 0 {
		hb.Topics = slices.Clone(s.start.Subscription.Topics) // joining again
	}
	s.hbInFlight = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), subscribeCallTimeout)
	go func() {
		defer cancel()
		resp, err := s.core.ShareGroupHeartbeat(ctx, hb)
		s.hbDone <- sharedHB{resp, err, hb.Epoch == 0}
	}()
}

// onHeartbeat takes a heartbeat's answer: a refusal that is not
// retriable (the member was removed or fenced) ends the stream; a new
// assignment is sent to the client.
func (s *sharedStream) onHeartbeat(resp *request.ShareHeartbeatResult, err error) error {
	now := time.Now()
	if err != nil {
		e := s.b.Error(err)
		if e.Retriable {
			s.hbAt = now.Add(subscribeRetry)
			return nil
		}
		if s.parts != nil && (e.Code == quirev1.ErrorCode_UNKNOWN_MEMBER_ID || e.Code == quirev1.ErrorCode_FENCED_MEMBER_EPOCH) {
			s.rejoin(now)
			return nil
		}
		s.epoch = 0 // the member is gone: nothing to leave
		return s.b.Status(fmt.Errorf("subscribe to share group %q: %w", s.start.Group, err))
	}
	rejoined := s.rejoining
	s.rejoining = false
	s.epoch = resp.Epoch
	s.interval = resp.Interval
	if s.interval <= 0 {
		s.interval = time.Second
	}
	s.hbAt = now.Add(s.interval)
	var parts []partKey
	for _, t := range resp.Assignment.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, partKey{t.Topic, p})
		}
	}
	slices.SortFunc(parts, comparePartKey)
	if slices.Equal(parts, s.parts) && s.parts != nil && !rejoined {
		return nil // a member that joined again is told its new epoch
	}
	var added, revoked []partKey
	for _, k := range parts {
		if _, ok := slices.BinarySearchFunc(s.parts, k, comparePartKey); !ok {
			added = append(added, k)
		}
	}
	for _, k := range s.parts {
		if _, ok := slices.BinarySearchFunc(parts, k, comparePartKey); !ok {
			revoked = append(revoked, k)
		}
	}
	for _, k := range revoked {
		delete(s.retryAt, k)
	}
	s.parts = parts
	if parts == nil {
		s.parts = []partKey{}
	}
	if err := s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Assignment{Assignment: &quirev1.SubscribeAssignment{
		MemberId: s.memberID, MemberEpoch: s.epoch, Assigned: partsToAssignment(added),
		Revoked: partsToAssignment(revoked), Owned: partsToAssignment(s.parts)}}}); err != nil {
		return errSharedBroken
	}
	return nil
}

// maybeFetch starts a share fetch when none is in flight and the stream
// holds fewer records than its credit.
func (s *sharedStream) maybeFetch(now time.Time) {
	if s.fetchStop != nil || s.nHeld >= s.maxRecords || s.epoch <= 0 {
		return
	}
	req := &request.ShareFetchRequest{Group: s.start.Group, MemberID: s.memberID, MaxWait: sharedFetchWait, MaxRecords: s.maxRecords - s.nHeld,
		Route: true, KeyOrdered: s.start.KeyOrdered}
	for _, k := range s.parts {
		if at, ok := s.retryAt[k]; ok {
			if now.Before(at) {
				continue
			}
			delete(s.retryAt, k)
		}
		req.Partitions = append(req.Partitions, request.SharePartition{Topic: k.topic, Partition: k.part})
	}
	if len(req.Partitions) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.fetchStop = cancel
	go func() {
		res, err := s.core.ShareFetch(ctx, req)
		s.fetchDone <- sharedFetched{res, err, now}
	}()
}

// onFetch sends what a fetch acquired, one SubscribeBatch per partition,
// and remembers it as held. A partition's failure leaves it out of
// fetches for a while; the member's removal ends the stream.
func (s *sharedStream) onFetch(f sharedFetched) error {
	now := time.Now()
	if f.err != nil {
		if s.ctx.Err() != nil {
			return nil
		}
		if err := s.fetchRefused(f.err); err != nil {
			return err
		}
		// Refused whole, for a reason that may pass: not again at once.
		s.log.Debug("shared subscribe fetch failed", "error", f.err)
		for _, k := range s.parts {
			s.retryAt[k] = now.Add(subscribeRetry)
		}
		return nil
	}
	deadline := f.at.Add(s.lockFor)
	for i := range f.results {
		r := &f.results[i]
		k := partKey{r.Topic, r.Partition}
		if r.Err != nil {
			if err := s.fetchRefused(r.Err); err != nil {
				return err
			}
			s.log.Debug("shared subscribe fetch failed", "topic", r.Topic, "partition", r.Partition, "error", r.Err)
			s.retryAt[k] = now.Add(sharedPartitionRetry)
			continue
		}
		if len(r.Acquired) == 0 {
			continue
		}
		recs, err := s.decode(r)
		if err != nil {
			// What was acquired and not sent stays locked until its
			// locks run out.
			s.log.Warn("shared subscribe stream could not decode records", "topic", r.Topic, "partition", r.Partition, "error", err)
		}
		if len(recs) == 0 {
			continue
		}
		h := s.held[k]
		if h == nil {
			h = map[int64]sharedLock{}
			s.held[k] = h
		}
		for _, rec := range recs {
			if _, ok := h[rec.Offset]; !ok {
				s.nHeld++
			}
			h[rec.Offset] = sharedLock{deadline: deadline}
		}
		if s.nextExpiry.IsZero() || deadline.Before(s.nextExpiry) {
			s.nextExpiry = deadline
		}
		batch := &quirev1.SubscribeBatch{Topic: r.Topic, Partition: r.Partition, Records: recs,
			NextOffset: recs[len(recs)-1].Offset + 1, LockExpiresMs: deadline.UnixMilli()}
		if err := s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Batch{Batch: batch}}); err != nil {
			return errSharedBroken
		}
	}
	return nil
}

// errSharedBroken: sending failed, the stream is gone; it ends with no
// status of its own.
var errSharedBroken = errors.New("subscribe: stream broken")

// statusOf is the status a stream ends with for err: none when it broke.
func statusOf(err error) error {
	if errors.Is(err, errSharedBroken) {
		return nil
	}
	return err
}

// fetchRefused ends the stream for a refusal meaning the member is gone
// or may not read, and lets anything else be tried again.
func (s *sharedStream) fetchRefused(err error) error {
	e := s.b.Error(err)
	switch e.Code {
	case quirev1.ErrorCode_UNKNOWN_MEMBER_ID, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED,
		quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, quirev1.ErrorCode_UNSUPPORTED_VERSION:
		if e.Code == quirev1.ErrorCode_UNKNOWN_MEMBER_ID {
			if s.epoch > 0 {
				s.rejoin(time.Now())
			}
			return nil
		}
		return s.b.Status(fmt.Errorf("subscribe to share group %q: %w", s.start.Group, err))
	case quirev1.ErrorCode_INVALID_REQUEST:
		if s.start.KeyOrdered {
			// A leader serves the group without key ordering (its
			// share.key.ordering changed since the stream began): the
			// stream cannot have what it asked for.
			return s.b.Status(fmt.Errorf("subscribe to share group %q: %w", s.start.Group, err))
		}
	}
	return nil
}

// rejoin has the member join its group again, with the same member id,
// when the group forgot it (it was silent past the session timeout, its
// heartbeats held up): as a Kafka share consumer does, the stream goes
// on. What it held was released on every leader when the group forgot
// it, so the stream holds nothing any more: acknowledging it is refused
// (INVALID_RECORD_STATE), and the credit is free.
func (s *sharedStream) rejoin(now time.Time) {
	s.log.Debug("shared subscribe stream's member forgotten: joining again", "epoch", s.epoch, "held", s.nHeld)
	s.epoch, s.rejoining = 0, true
	clear(s.held)
	s.nHeld, s.nextExpiry = 0, time.Time{}
	if !s.hbInFlight { // else when the one in flight answers
		s.hbAt = now
	}
}

// decode returns the records of r's acquired ranges, in offset order,
// with their delivery counts.
func (s *sharedStream) decode(r *request.ShareFetchResult) ([]*quirev1.BatchRecord, error) {
	text := s.start.Format == quirev1.RecordFormat_RECORD_FORMAT_AUTO
	var out []*quirev1.BatchRecord
	ranges := r.Acquired
	last := ranges[len(ranges)-1].Last
	err := record.WalkRead(r.Records, func(batch []byte, h record.Header) error {
		if h.Control() || h.NextOffset() <= ranges[0].First || h.BaseOffset > last {
			return nil
		}
		return record.ForEachRecord(batch, func(rec *record.Record) error {
			if rec.Offset > last {
				return errDecoded // the rest of a producer's batch, not acquired
			}
			i, ok := slices.BinarySearchFunc(ranges, rec.Offset, func(a request.ShareAcquiredRange, off int64) int {
				switch {
				case a.Last < off:
					return -1
				case a.First > off:
					return 1
				}
				return 0
			})
			if !ok {
				return nil
			}
			out = append(out, batchRecord(rec, h.PartitionLeaderEpoch, int32(ranges[i].DeliveryCount), text))
			return nil
		})
	})
	if errors.Is(err, errDecoded) {
		err = nil
	}
	return out, err
}

// errDecoded stops decoding past the last record acquired.
var errDecoded = errors.New("subscribe: past the records acquired")

func batchRecord(r *record.Record, epoch, count int32, text bool) *quirev1.BatchRecord {
	out := &quirev1.BatchRecord{Offset: r.Offset, TimestampMs: r.Timestamp, LeaderEpoch: epoch, DeliveryCount: count}
	if r.Key != nil {
		if text && utf8.Valid(r.Key) {
			out.KeyData = &quirev1.BatchRecord_Key{Key: string(r.Key)}
		} else {
			out.KeyData = &quirev1.BatchRecord_KeyBytes{KeyBytes: slices.Clone(r.Key)}
		}
	}
	if r.Value != nil {
		if text && utf8.Valid(r.Value) {
			out.ValueData = &quirev1.BatchRecord_Value{Value: string(r.Value)}
		} else {
			out.ValueData = &quirev1.BatchRecord_ValueBytes{ValueBytes: slices.Clone(r.Value)}
		}
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, &quirev1.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
	}
	return out
}

// expire forgets the records whose locks ran out: the share-partition
// has released them (or will at its next call), so they are the
// stream's no more, and its credit is freed.
func (s *sharedStream) expire(now time.Time) {
	if s.nextExpiry.IsZero() || now.Before(s.nextExpiry) {
		return
	}
	s.nextExpiry = time.Time{}
	for k, h := range s.held {
		for off, l := range h {
			if !now.Before(l.deadline) {
				delete(h, off)
				s.nHeld--
				continue
			}
			if s.nextExpiry.IsZero() || l.deadline.Before(s.nextExpiry) {
				s.nextExpiry = l.deadline
			}
		}
		if len(h) == 0 {
			delete(s.held, k)
		}
	}
}
