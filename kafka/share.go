package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Share groups (KIP-932): ShareGroupHeartbeat, ShareFetch and
// ShareAcknowledge over the request core's share-group calls. A share
// session (KIP-932's, like a fetch session) is the set of partitions a
// member fetches from this node and the epoch its next request carries;
// it is the door's own, kept here per group and member. Served only when
// the backend serves share groups (Config.ShareGroups), so ApiVersions
// advertises them only then.

// The share-group API keys.
const (
	shareGroupHeartbeatKey = 76
	shareFetchKey          = 78
	shareAcknowledgeKey    = 79
)

// shareVersions: from version 1, the first with client-made member ids
// and KIP-932's final layout, to 2 of the fetch and acknowledge, which
// renew locks (KIP-1222) and limit a fetch to its record count (always
// the case here: an acquisition never passes MaxRecords).
var shareVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: shareGroupHeartbeatKey, MinVersion: 1, MaxVersion: 1},
	{ApiKey: shareFetchKey, MinVersion: 1, MaxVersion: 2},
	{ApiKey: shareAcknowledgeKey, MinVersion: 1, MaxVersion: 2},
}

func isShareKey(key int16) bool {
	return key == shareGroupHeartbeatKey || key == shareFetchKey || key == shareAcknowledgeKey || key == shareGroupDescribeKey ||
		key == deleteShareGroupOffsetsKey || key == describeShareGroupOffsetsKey || key == alterShareGroupOffsetsKey
}

var ackBatchSchema = strct[kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch](
	fld(kInt64), // first offset
	fld(kInt64), // last offset
	fld(kInt8s), // acknowledge types
)

func init() {
	versions = append(versions, shareVersions...)
	schemas[shareGroupHeartbeatKey] = apiSchema{0, strct[kmsg.ShareGroupHeartbeatRequest](
		fld(kString),     // group
		fld(kString),     // member id
		fld(kInt32),      // member epoch
		fld(kNullString), // rack id
		fld(kStrings),    // subscribed topic names (nullable)
	)}
	schemas[shareFetchKey] = apiSchema{0, strct[kmsg.ShareFetchRequest](
		fld(kNullString),     // group
		fld(kNullString),     // member id
		fld(kInt32),          // share session epoch
		fld(kInt32),          // max wait
		fld(kInt32),          // min bytes
		fld(kInt32),          // max bytes
		fld(kInt32).since(1), // max records
		fld(kInt32).since(1), // batch size
		fld(kInt8).since(2),  // share acquire mode
		fld(kInt8).since(2),  // is renew ack
		arr(strct[kmsg.ShareFetchRequestTopic](
			fld(kUUID),
			arr(strct[kmsg.ShareFetchRequestTopicPartition](
				fld(kInt32),          // partition
				fld(kInt32).in(0, 0), // partition max bytes
				arr(ackBatchSchema),
			)),
		)),
		arr(strct[kmsg.ShareFetchRequestForgottenTopicsData](
			fld(kUUID),
			fld(kInt32s), // partitions
		)),
	)}
	schemas[shareAcknowledgeKey] = apiSchema{0, strct[kmsg.ShareAcknowledgeRequest](
		fld(kNullString),    // group
		fld(kNullString),    // member id
		fld(kInt32),         // share session epoch
		fld(kInt8).since(2), // is renew ack
		arr(strct[kmsg.ShareAcknowledgeRequestTopic](
			fld(kUUID),
			arr(strct[kmsg.ShareAcknowledgeRequestTopicPartition](
				fld(kInt32), // partition
				arr(ackBatchSchema),
			)),
		)),
	)}
}

// shareSessions are the share sessions of the members fetching here.
//
// A session ends by the client's request (epoch -1, once its
// acknowledgements are applied) or with the connection that opened it:
// then what the member still holds on the session's partitions is
// released at once (Backend.ShareRelease), for the group's other members,
// as Kafka's broker does, rather than when its locks run out. A session
// being closed stays in the map, marked closing, until that release is
// done: a new session of the member (epoch 0, on another connection
// after a reconnect) waits for it, so that the release cannot take the
// records the new session acquires. A connection's close releases only
// the sessions it opened that are still the member's: one replaced
// meanwhile by a new session (a reconnect seen before the old
// connection's end) is not released, since the member's records are not
// told apart by session; they stay locked until acknowledged in the new
// session or their locks run out.
type shareSessions struct {
	mu sync.Mutex
	m  map[shareSessionKey]*shareSession
}

type shareSessionKey struct{ group, member string }

type shareSession struct {
	next  int32 // the epoch the next request carries
	parts []request.SharePartition
	// closing is closed once the session's release is done; nil while
	// the session is open.
	closing chan struct{}
}

var (
	errShareSessionNotFound = errors.New("no share session for this member: open one with epoch 0")
	errShareSessionEpoch    = errors.New("share session epoch out of order")
)

// step checks a request's epoch against the member's session and moves
// it on: 0 opens a new one (after the release of one being closed), -1
// starts closing it, any other must be the one expected. It returns the
// session's partitions after add and forget, and the session. A session
// opened is recorded as cs's (nil: no connection's); one being closed
// (epoch -1) must be finished with closed once its release is done.
func (ss *shareSessions) step(ctx context.Context, cs *connState, group, member string, epoch int32, add, forget []request.SharePartition) ([]request.SharePartition, *shareSession, int16, error) {
	k := shareSessionKey{group, member}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = make(map[shareSessionKey]*shareSession)
	}
	s := ss.m[k]
	for epoch == 0 && s != nil && s.closing != nil {
		// The member's last session is being released: the new one
		// starts after.
		ss.mu.Unlock()
		select {
		case <-s.closing:
		case <-ctx.Done():
			ss.mu.Lock()
			code, _ := coreError(ctx.Err())
			return nil, nil, code, ctx.Err()
		}
		ss.mu.Lock()
		s = ss.m[k]
	}
	switch {
	case epoch == 0:
		s = &shareSession{}
		ss.m[k] = s
		if cs != nil {
			if cs.shares == nil {
				cs.shares = make(map[shareSessionKey]*shareSession)
			}
			cs.shares[k] = s
		}
	case s == nil || s.closing != nil:
		return nil, nil, kerr.ShareSessionNotFound.Code, errShareSessionNotFound
	case epoch == -1:
		s.closing = make(chan struct{})
	case epoch != s.next:
		return nil, nil, kerr.InvalidShareSessionEpoch.Code, errShareSessionEpoch
	}
	for _, f := range forget {
		for i, p := range s.parts {
			if p.Topic == f.Topic && p.Partition == f.Partition {
				s.parts = append(s.parts[:i], s.parts[i+1:]...)
				break
			}
		}
	}
	for _, a := range add {
		found := false
		for _, p := range s.parts {
			found = found || (p.Topic == a.Topic && p.Partition == a.Partition)
		}
		if !found {
			s.parts = append(s.parts, request.SharePartition{Topic: a.Topic, Partition: a.Partition})
		}
	}
	if epoch != -1 {
		s.next = max(1, epoch+1)
	}
	return append([]request.SharePartition(nil), s.parts...), s, 0, nil
}

// closeOf starts closing the sessions cs opened that are still their
// members' (not replaced by a new one, nor being closed), and returns
// them with their keys, for release and then closed.
func (ss *shareSessions) closeOf(cs *connState) map[shareSessionKey]*shareSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := map[shareSessionKey]*shareSession{}
	for k, s := range cs.shares {
		if ss.m[k] == s && s.closing == nil {
			s.closing = make(chan struct{})
			out[k] = s
		}
	}
	cs.shares = nil
	return out
}

// closed ends a session being closed, its release done: it leaves the
// map and a new session of its member may open.
func (ss *shareSessions) closed(k shareSessionKey, s *shareSession) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m[k] == s {
		delete(ss.m, k)
	}
	close(s.closing)
}

// shareReleaseTimeout bounds the release of a closed connection's
// sessions (a save): past it, their records wait for their locks.
const shareReleaseTimeout = 30 * time.Second

// releaseShareSessions releases the share sessions cs opened, its
// connection having ended (with the request it was handling, if any).
// They are only dropped while the server is closing: the node's
// share-partitions go to other leaders, which free what was acquired
// here when they restore them.
func (s *Server) releaseShareSessions(ctx context.Context, cs *connState) {
	if len(cs.shares) == 0 {
		return
	}
	for k, sess := range s.shares.closeOf(cs) {
		if s.ctx.Err() == nil {
			s.releaseShareSession(ctx, k.group, k.member, sess.parts)
		}
		s.shares.closed(k, sess)
	}
}

// releaseShareSession releases what member holds on parts, a session of
// it having closed; a failure is logged, the records then waiting for
// their locks to run out.
func (s *Server) releaseShareSession(ctx context.Context, group, member string, parts []request.SharePartition) {
	if len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, shareReleaseTimeout)
	defer cancel()
	if err := s.cfg.Backend.ShareRelease(ctx, group, member, parts); err != nil {
		s.cfg.Logger.Debug("share session closed: its records not released", "group", group, "member", member, "error", err)
	}
}

// shareAcks turns Kafka's acknowledgement batches into the core's ranges:
// one type for the whole batch, or one per offset; gaps (type 0) name
// offsets with no record and are left out. Renew (4) exists from version
// 2: before, it is an unknown type, which the core refuses.
func shareAcks(version int16, batches []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []request.ShareAck {
	var out []request.ShareAck
	typeOf := func(t int8) request.ShareAckType {
		if version < 2 && t == int8(request.ShareRenew) {
			return -1
		}
		return request.ShareAckType(t)
	}
	for _, b := range batches {
		if len(b.AcknowledgeTypes) == 1 {
			if b.AcknowledgeTypes[0] != 0 {
				out = append(out, request.ShareAck{First: b.FirstOffset, Last: b.LastOffset, Type: typeOf(b.AcknowledgeTypes[0])})
			}
			continue
		}
		for i, t := range b.AcknowledgeTypes {
			o := b.FirstOffset + int64(i)
			if t == 0 || o > b.LastOffset {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].Type == typeOf(t) {
				out[n-1].Last = o
				continue
			}
			out = append(out, request.ShareAck{First: o, Last: o, Type: typeOf(t)})
		}
	}
	return out
}

func shareGroupHeartbeat(ctx context.Context, b Backend, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	fail := func(err error) *kmsg.ShareGroupHeartbeatResponse {
		code, msg := groupError(err)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	ids, err := loadTopicIDs(ctx, b)
	if err != nil {
		return fail(err)
	}
	out, err := b.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: req.GroupID, MemberID: req.MemberID, Epoch: req.MemberEpoch, Topics: req.SubscribedTopicNames})
	if err != nil {
		return fail(err)
	}
	resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = kmsg.StringPtr(out.MemberID), out.Epoch, int32(out.Interval.Milliseconds())
	if req.MemberEpoch == -1 {
		return resp
	}
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	for _, t := range out.Assignment.Topics {
		id, ok := ids.ids[t.Topic]
		if !ok {
			continue
		}
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = id, t.Partitions
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	resp.Assignment = &a
	return resp
}

func (s *Server) shareFetch(ctx context.Context, b Backend, cs *connState, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := kmsg.NewPtrShareFetchResponse()
	fail := func(code int16, msg string) *kmsg.ShareFetchResponse {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	if req.GroupID == nil || req.MemberID == nil {
		return fail(invalidRequest, "a share fetch names its group and member")
	}
	ids, err := loadTopicIDs(ctx, b)
	if err != nil {
		return fail(coreError(err))
	}
	var add, forget []request.SharePartition
	type topicPartition struct {
		topic string
		p     int32
	}
	acks := map[topicPartition][]request.ShareAck{}
	unknown := map[[16]byte]bool{}
	for _, t := range req.Topics {
		name, ok := ids.names[t.TopicID]
		if !ok {
			unknown[t.TopicID] = true
			continue
		}
		for _, p := range t.Partitions {
			add = append(add, request.SharePartition{Topic: name, Partition: p.Partition})
			if a := shareAcks(req.Version, p.AcknowledgementBatches); len(a) > 0 {
				acks[topicPartition{name, p.Partition}] = a
			}
		}
	}
	for _, t := range req.ForgottenTopicsData {
		if name, ok := ids.names[t.TopicID]; ok {
			for _, p := range t.Partitions {
				forget = append(forget, request.SharePartition{Topic: name, Partition: p})
			}
		}
	}
	parts, sess, code, err := s.shares.step(ctx, cs, *req.GroupID, *req.MemberID, req.ShareSessionEpoch, add, forget)
	if err != nil {
		return fail(code, err.Error())
	}
	if req.ShareSessionEpoch == -1 {
		// The session closed: once its acknowledgements are applied, what
		// the member still holds on its partitions is released.
		defer func() {
			s.releaseShareSession(ctx, *req.GroupID, *req.MemberID, parts)
			s.shares.closed(shareSessionKey{*req.GroupID, *req.MemberID}, sess)
		}()
	}
	for i := range parts {
		parts[i].Acks = acks[topicPartition{parts[i].Topic, parts[i].Partition}]
	}
	resp.AcquisitionLockTimeoutMillis = int32(b.ShareLockDuration(*req.GroupID).Milliseconds())
	var results []request.ShareFetchResult
	if req.ShareSessionEpoch == -1 || req.IsRenewAck {
		// The last request of a session only acknowledges, as does one
		// renewing locks (version 2).
		var withAcks []request.SharePartition
		for _, p := range parts {
			if len(p.Acks) > 0 {
				withAcks = append(withAcks, p)
			}
		}
		if len(withAcks) > 0 {
			acked, err := b.ShareAcknowledge(ctx, *req.GroupID, *req.MemberID, withAcks)
			if err != nil {
				return fail(groupError(err))
			}
			for _, a := range acked {
				results = append(results, request.ShareFetchResult{Topic: a.Topic, Partition: a.Partition, AckErr: a.Err})
			}
		}
	} else if len(parts) > 0 {
		results, err = b.ShareFetch(ctx, &request.ShareFetchRequest{Group: *req.GroupID, MemberID: *req.MemberID,
			MaxWait: time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond, MaxRecords: int(max(req.MaxRecords, 0)), Partitions: parts})
		if err != nil {
			return fail(groupError(err))
		}
	}
	byTopic := map[string]int{}
	var leaders hinted
	for _, r := range results {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = ids.ids[r.Topic]
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = r.Partition
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		if r.Err != nil {
			code, msg := coreError(r.Err)
			p.ErrorCode, p.ErrorMessage = code, kmsg.StringPtr(msg)
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaderHint(r.Err)
			leaders.add(p.CurrentLeader.LeaderID)
		}
		if r.AckErr != nil {
			code, msg := coreError(r.AckErr)
			p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = code, kmsg.StringPtr(msg)
		}
		p.Records = r.Records
		for _, a := range r.Acquired {
			p.AcquiredRecords = append(p.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: a.First, LastOffset: a.Last, DeliveryCount: int16(min(a.DeliveryCount, 32767))})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	for _, e := range leaderEndpoints(ctx, b, leaders) {
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: e.id, Host: e.host, Port: e.port, Rack: e.rack})
	}
	for id := range unknown {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *Server) shareAcknowledge(ctx context.Context, b Backend, cs *connState, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := kmsg.NewPtrShareAcknowledgeResponse()
	fail := func(code int16, msg string) *kmsg.ShareAcknowledgeResponse {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	if req.GroupID == nil || req.MemberID == nil {
		return fail(invalidRequest, "a share acknowledgement names its group and member")
	}
	if req.ShareSessionEpoch == 0 {
		return fail(kerr.InvalidShareSessionEpoch.Code, "epoch 0 opens a session, which only a share fetch does")
	}
	ids, err := loadTopicIDs(ctx, b)
	if err != nil {
		return fail(coreError(err))
	}
	var parts []request.SharePartition
	for _, t := range req.Topics {
		name, ok := ids.names[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			batches := make([]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, len(p.AcknowledgementBatches))
			for i, a := range p.AcknowledgementBatches {
				batches[i] = kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: a.AcknowledgeTypes}
			}
			parts = append(parts, request.SharePartition{Topic: name, Partition: p.Partition, Acks: shareAcks(req.Version, batches)})
		}
	}
	sessParts, sess, code, err := s.shares.step(ctx, cs, *req.GroupID, *req.MemberID, req.ShareSessionEpoch, nil, nil)
	if err != nil {
		return fail(code, err.Error())
	}
	if req.ShareSessionEpoch == -1 {
		// As a share fetch closing its session (shareFetch).
		defer func() {
			s.releaseShareSession(ctx, *req.GroupID, *req.MemberID, sessParts)
			s.shares.closed(shareSessionKey{*req.GroupID, *req.MemberID}, sess)
		}()
	}
	acked, err := b.ShareAcknowledge(ctx, *req.GroupID, *req.MemberID, parts)
	if err != nil {
		return fail(groupError(err))
	}
	resp.AcquisitionLockTimeoutMillis = int32(b.ShareLockDuration(*req.GroupID).Milliseconds())
	byTopic := map[string]int{}
	var leaders hinted
	for _, a := range acked {
		i, ok := byTopic[a.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[a.Topic] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = ids.ids[a.Topic]
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = a.Partition
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		if a.Err != nil {
			code, msg := coreError(a.Err)
			p.ErrorCode, p.ErrorMessage = code, kmsg.StringPtr(msg)
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaderHint(a.Err)
			leaders.add(p.CurrentLeader.LeaderID)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	for _, e := range leaderEndpoints(ctx, b, leaders) {
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareAcknowledgeResponseNodeEndpoint{NodeID: e.id, Host: e.host, Port: e.port, Rack: e.rack})
	}
	return resp
}
