package request

import (
	"context"
	"fmt"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/internal/fetchbuf"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

const (
	// DefaultFetchMaxBytes is fetch.max.bytes.
	DefaultFetchMaxBytes = 52428800
	// MaxSendBytes is the most a door sends in one answer (the gRPC
	// server's grpc.MaxSendMsgSize).
	MaxSendBytes = 64 << 20
	// MaxFetchResponseBytes caps a fetch's max bytes: a response may pass
	// its cap by one batch (at least one batch is always returned), and
	// must still fit under MaxSendBytes, or the client would retry the
	// same too-large fetch for ever.
	MaxFetchResponseBytes = MaxSendBytes / 2
	maxFetchWait          = 5 * time.Minute
)

// FetchRequest reads partitions from offsets, long-polled: it answers
// once MinBytes are there to read, or MaxWait has passed.
type FetchRequest struct {
	MaxWait  time.Duration
	MinBytes int
	// MaxBytes caps the records of the answer (0: DefaultFetchMaxBytes;
	// never more than MaxFetchResponseBytes); the first batch is returned
	// whatever its size.
	MaxBytes   int
	Partitions []FetchPartition
	// Pooled reads into buffers from internal/fetchbuf (FetchResult.Buf),
	// which the door gives back once the answer is sent (Release).
	Pooled bool
	// Received is when the door received the request (the zero time:
	// not timed).
	Received time.Time
	// Route has PollAnywhere (and so Fetch) pass the partitions another
	// broker leads on to it.
	Route bool
	// Isolation is ReadUncommitted (up to the high watermark, every
	// record) or ReadCommitted (up to the last stable offset, with the
	// aborted transactions the batches overlap).
	Isolation Isolation
}

// Isolation is a fetch's isolation level, numbered as Kafka numbers it.
type Isolation int8

const (
	// ReadUncommitted reads up to the high watermark, transactional
	// records whatever their outcome.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset: the records of
	// committed transactions and of no transaction; the batches of
	// aborted transactions are read too, with the list of them
	// (FetchResult.Aborted), for the reader to drop.
	ReadCommitted Isolation = 1
)

// FetchPartition is one partition of a fetch.
type FetchPartition struct {
	Topic     string
	Partition int32
	Offset    int64
	MaxBytes  int
	// CurrentLeaderEpoch, when set, fences a client with an older or
	// newer view of the leadership.
	CurrentLeaderEpoch *int32
}

// FetchResult is one partition's answer, in request order: the log's
// batches as stored, never decoded, for the door to pass on as they are.
type FetchResult struct {
	FetchPartition
	Records                                     []byte
	HighWatermark, LogEndOffset, LogStartOffset int64
	// LastStableOffset is the partition's LSO (-1 when unknown): the
	// first offset of its oldest open transaction, or the HW if lower.
	LastStableOffset int64
	// Aborted lists, for a ReadCommitted fetch, the aborted transactions
	// the records overlap, in marker order.
	Aborted []storage.AbortedTxn
	// Err is an *Error, or nil.
	Err error
	// Buf is the internal/fetchbuf buffer holding Records, if any.
	Buf *[]byte
}

// Release gives back the buffers of results that will not be sent.
func Release(results []FetchResult) {
	for i := range results {
		if results[i].Buf != nil {
			fetchbuf.Put(results[i].Buf)
			results[i].Buf, results[i].Records = nil, nil
		}
	}
}

// Fetch checks and authorizes a fetch (Read on each topic), then reads
// it: Poll, or with Route, PollAnywhere (a Subscribe stream's reads).
func (c *Core) Fetch(ctx context.Context, req *FetchRequest) ([]FetchResult, error) {
	if len(req.Partitions) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no partitions", replica.ErrInvalidRequest))
	}
	if err := checkFetchSizes(req); err != nil {
		return nil, c.fail(err)
	}
	if req.Isolation != ReadUncommitted && req.Isolation != ReadCommitted {
		return nil, c.fail(fmt.Errorf("%w: isolation level %d", replica.ErrInvalidRequest, req.Isolation))
	}
	if err := c.authorizeEach(ctx, auth.OpRead, len(req.Partitions), func(i int) string { return req.Partitions[i].Topic }, nil); err != nil {
		return nil, err
	}
	if req.Route {
		return c.PollAnywhere(ctx, req), nil
	}
	return c.Poll(ctx, req), nil
}

// Poll reads every partition, long-polling until MinBytes are available
// or MaxWait passes, for a caller that has authorized the reads (a
// stream reading on from its first request). It registers with each
// partition before reading, so an append between the read and the wait
// is never missed. The time from Received to the first read of each
// partition is the fetch queue time.
func (c *Core) Poll(ctx context.Context, req *FetchRequest) []FetchResult {
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultFetchMaxBytes
	}
	maxBytes = min(maxBytes, MaxFetchResponseBytes)
	maxWait := min(max(req.MaxWait, 0), maxFetchWait)
	received := req.Received
	wake := make(chan struct{}, 1)
	var watched []*replica.Partition
	defer func() {
		for _, p := range watched {
			p.Unwatch(wake)
		}
	}()
	var timer <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timer = t.C
	}
	for first := true; ; first = false {
		if !first {
			received = time.Time{}
		}
		results, total, anyErr := c.readAll(req, maxBytes, received, first, &watched, wake)
		// As Kafka: no wait, min bytes 0, or enough data answer at once.
		if maxWait == 0 || total >= req.MinBytes || anyErr {
			return results
		}
		Release(results)
		select {
		case <-wake:
		case <-timer:
			results, _, _ := c.readAll(req, maxBytes, time.Time{}, false, nil, nil)
			return results
		case <-ctx.Done():
			return results
		}
	}
}

// readAll reads each partition once. On the first pass it registers wake
// with every partition found.
func (c *Core) readAll(req *FetchRequest, maxBytes int, received time.Time, register bool, watched *[]*replica.Partition, wake chan struct{}) ([]FetchResult, int, bool) {
	results := make([]FetchResult, len(req.Partitions))
	total := 0
	anyErr := false
	for i, s := range req.Partitions {
		r := &results[i]
		r.FetchPartition, r.HighWatermark, r.LogEndOffset, r.LogStartOffset, r.LastStableOffset = s, -1, -1, -1, -1
		part, err := c.leaderPartition(context.Background(), s.Topic, s.Partition, false)
		if err != nil {
			r.Err, anyErr = c.fail(err), true
			continue
		}
		if register && watched != nil {
			part.Watch(wake)
			*watched = append(*watched, part)
		}
		if err := part.CheckLeaderEpoch(s.CurrentLeaderEpoch); err != nil {
			r.Err, anyErr = c.fail(err), true
			continue
		}
		limit := replica.ReadLimit(s.MaxBytes, maxBytes, total)
		if limit <= 0 {
			r.HighWatermark, r.LogEndOffset, r.LogStartOffset = part.HighWatermark(), part.LogEndOffset(), part.LogStartOffset()
			r.LastStableOffset = part.LastStableOffset()
			continue
		}
		var res storage.ReadResult
		var hw int64
		c.cfg.Observer.ObserveFetch(received)
		switch {
		case req.Isolation == ReadCommitted:
			res, hw, r.LastStableOffset, r.Aborted, r.Buf, err = readCommitted(part, s.Offset, limit, req.Pooled)
		case req.Pooled:
			res, hw, r.Buf, err = readPooled(part, s.Offset, limit)
			r.LastStableOffset = part.LastStableOffset()
		default:
			res, hw, err = part.Read(s.Offset, limit)
			r.LastStableOffset = part.LastStableOffset()
		}
		r.HighWatermark, r.LogEndOffset, r.LogStartOffset = hw, part.LogEndOffset(), part.LogStartOffset()
		if err != nil {
			r.Err, anyErr = c.fail(err), true
			continue
		}
		r.Records = res.Batches
		total += len(res.Batches)
	}
	return results, total, anyErr
}

// readPooled is Partition.Read into a buffer from internal/fetchbuf. buf
// is nil when the batches are not in it (nothing read, or a batch too big
// for it: then they are in a buffer of their own).
func readPooled(p *replica.Partition, offset int64, maxBytes int) (res storage.ReadResult, hw int64, buf *[]byte, err error) {
	buf = fetchbuf.Get(pooledBytes(maxBytes))
	res, hw, err = p.ReadAppend(*buf, offset, maxBytes)
	buf = keepPooled(&res, buf, err)
	return res, hw, buf, err
}

// keepPooled gives buf back unless the read (err its error) left its
// batches in it, and leaves them there when they fill a
// good part of it, and otherwise copies them out and gives buf back
// (nil): a fetch answers partitions, each read into a buffer of at least
// fetchbuf.Size, and one of thousands of partitions with a little data
// each would otherwise hold a megabyte a partition until it is answered.
// Pooled buffers held are so at most four times the records' bytes,
// which the fetch's byte limit bounds.
func keepPooled(res *storage.ReadResult, buf *[]byte, err error) *[]byte {
	if err != nil || len(res.Batches) == 0 || cap(res.Batches) != cap(*buf) || &res.Batches[:1][0] != &(*buf)[:1][0] {
		// Nothing read into it, or a batch too big for it (read into a
		// buffer of its own).
		fetchbuf.Put(buf)
		return nil
	}
	if len(res.Batches) < cap(*buf)/4 {
		res.Batches = append([]byte(nil), res.Batches...)
		fetchbuf.Put(buf)
		return nil
	}
	*buf = res.Batches
	return buf
}

// pooledBytes is the size of the pooled buffer asked for a read of up
// to maxBytes: at most maxPooledRead, so that a large limit (a client
// may ask 50 MiB of a partition) does not allocate a buffer of its size
// for a read that may find far less; a read that needs more grows into
// a buffer of its own, as an unpooled read does.
func pooledBytes(maxBytes int) int { return min(maxBytes, maxPooledRead) }

// maxPooledRead is the largest pooled read buffer asked for: the Go
// client's partition limit (4 MiB), four times Kafka's clients' (1 MiB).
const maxPooledRead = 4 << 20

// readCommitted is a read_committed read (Partition.ReadCommittedAppend),
// into a buffer from internal/fetchbuf when pooled (buf nil when the
// batches are not in it).
func readCommitted(p *replica.Partition, offset int64, maxBytes int, pooled bool) (res storage.ReadResult, hw, lso int64, aborted []storage.AbortedTxn, buf *[]byte, err error) {
	if !pooled {
		res, hw, lso, aborted, err = p.ReadCommittedAppend(nil, offset, maxBytes)
		return res, hw, lso, aborted, nil, err
	}
	buf = fetchbuf.Get(pooledBytes(maxBytes))
	res, hw, lso, aborted, err = p.ReadCommittedAppend(*buf, offset, maxBytes)
	if buf = keepPooled(&res, buf, err); err != nil {
		return res, hw, lso, nil, nil, err
	}
	return res, hw, lso, aborted, buf, nil
}

// checkFetchSizes refuses a negative wait or size, which no client means:
// read as zero, a wait of a minute asked with min bytes -1 would be
// answered at once, and one taken as given would never end.
func checkFetchSizes(req *FetchRequest) error {
	switch {
	case req.MaxWait < 0:
		return fmt.Errorf("%w: max wait %v is negative", replica.ErrInvalidRequest, req.MaxWait)
	case req.MinBytes < 0:
		return fmt.Errorf("%w: min bytes %d is negative", replica.ErrInvalidRequest, req.MinBytes)
	case req.MaxBytes < 0:
		return fmt.Errorf("%w: max bytes %d is negative", replica.ErrInvalidRequest, req.MaxBytes)
	}
	for _, p := range req.Partitions {
		if p.MaxBytes < 0 {
			return fmt.Errorf("%w: %s-%d: max bytes %d is negative", replica.ErrInvalidRequest, p.Topic, p.Partition, p.MaxBytes)
		}
	}
	return nil
}
