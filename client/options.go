package client

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// Opt configures a Client. Options are applied in order; later ones win.
type Opt func(*config)

// Acks is how many replicas must have a batch before a produce succeeds.
type Acks int32

// The acks settings, with Kafka's numbers.
const (
	// AllISRAcks waits until every in-sync replica has the batch (-1).
	AllISRAcks Acks = -1
	// LeaderAck waits for the leader's local append (1).
	LeaderAck Acks = 1
	// NoAck does not wait for any answer (0); offsets are then unknown (-1).
	NoAck Acks = 0
)

// Codec is a batch compression codec.
type Codec = record.Codec

// The compression codecs.
const (
	NoCompression     = record.None
	GzipCompression   = record.Gzip
	SnappyCompression = record.Snappy
	LZ4Compression    = record.LZ4
	ZstdCompression   = record.Zstd
)

type config struct {
	seeds          []string
	clientID       string
	dialOpts       []grpc.DialOption
	logger         hclog.Logger
	requestTimeout time.Duration
	retryBackoff   time.Duration
	metadataMaxAge time.Duration
	metadataGrace  time.Duration // see metadataAsk
	autoCreate     bool

	// producer
	deliveryTimeout time.Duration
	linger          time.Duration
	batchMaxBytes   int
	batchMaxSet     bool // BatchMaxBytes given: not the topic's limit
	maxBufBytes     int64
	blockOnFull     bool
	acks            Acks
	partitioner     Partitioner
	codec           Codec
	idempotent      bool
	idempotentSet   bool // Idempotent given
	maxInFlight     int  // MaxInFlightPerPartition
	maxInFlightSet  bool // MaxInFlightPerPartition given
	retryUnknown    bool // RetryUnknownOutcome

	// consumer
	fetchMaxWait       time.Duration
	fetchMinBytes      int32
	isolation          quirev1.IsolationLevel
	isolationSet       bool // ReadCommitted or ReadUncommitted given
	fetchMaxBytes      int32
	fetchPartMaxBytes  int32
	fetchBufferedPolls int
	resetOffset        Offset
	resetNone          bool // report offsets out of range instead
}

func defaultConfig() config {
	return config{
		clientID:           "quire-go",
		logger:             hclog.NewNullLogger(),
		requestTimeout:     30 * time.Second,
		retryBackoff:       100 * time.Millisecond,
		metadataMaxAge:     5 * time.Minute,
		metadataGrace:      metadataGrace,
		deliveryTimeout:    2 * time.Minute,
		batchMaxBytes:      1 << 20,
		maxBufBytes:        16 << 20,
		blockOnFull:        true,
		acks:               AllISRAcks,
		idempotent:         true,
		fetchMaxWait:       500 * time.Millisecond,
		fetchMinBytes:      1,
		fetchMaxBytes:      16 << 20,
		fetchPartMaxBytes:  4 << 20,
		fetchBufferedPolls: 4,
		resetOffset:        AtStart(),
	}
}

// SeedBrokers sets the brokers (host:port) the client first asks for
// metadata. Required.
func SeedBrokers(addrs ...string) Opt {
	return func(c *config) { c.seeds = append([]string(nil), addrs...) }
}

// ClientID names the client to brokers (sent as the gRPC user agent).
func ClientID(id string) Opt { return func(c *config) { c.clientID = id } }

// DialOptions adds gRPC dial options (TLS credentials, interceptors...).
// Without transport credentials the client dials in plaintext.
func DialOptions(opts ...grpc.DialOption) Opt {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// Logger sets the client's logger (default: discard).
func Logger(l hclog.Logger) Opt { return func(c *config) { c.logger = l } }

// RequestTimeout bounds each request to a broker (default 30s). Fetches add
// their long-poll wait on top.
func RequestTimeout(d time.Duration) Opt { return func(c *config) { c.requestTimeout = d } }

// RetryBackoff is the wait before retrying a retriable failure and the
// minimum interval between metadata refreshes (default 100ms).
func RetryBackoff(d time.Duration) Opt { return func(c *config) { c.retryBackoff = d } }

// MetadataMaxAge is how often metadata is refreshed when nothing asks for
// it sooner (default 5m).
func MetadataMaxAge(d time.Duration) Opt { return func(c *config) { c.metadataMaxAge = d } }

// AllowAutoTopicCreation lets metadata requests create the topics they
// name when the broker allows it (auto.create.topics.enable); where it
// does not, the topic's UNKNOWN_TOPIC_OR_PARTITION comes back (after a
// second of asking again, as for any topic the metadata does not hold).
func AllowAutoTopicCreation() Opt { return func(c *config) { c.autoCreate = true } }

// DeliveryTimeout bounds how long a produced record may wait, counting
// retries, before its callback gets an error (default 2m, Kafka's
// delivery.timeout.ms).
func DeliveryTimeout(d time.Duration) Opt { return func(c *config) { c.deliveryTimeout = d } }

// Linger is how long a partition's batch waits for more records before it
// is sent (default 0: send at once when nothing of the partition is in
// flight, else when a request is answered or the batch is full, which
// batches naturally under load; see MaxInFlightPerPartition).
func Linger(d time.Duration) Opt { return func(c *config) { c.linger = d } }

// BatchMaxBytes caps one record batch. Without it a topic's batches follow
// its max.message.bytes, learned from metadata (1 MiB from a broker that
// does not say). A record that does not fit in an empty batch fails with
// ErrRecordTooLarge.
func BatchMaxBytes(n int) Opt { return func(c *config) { c.batchMaxBytes, c.batchMaxSet = n, true } }

// MaxBufferedBytes caps the bytes of records produced but not yet
// acknowledged (default 16 MiB). What happens when full is set by
// BlockOnBufferFull.
func MaxBufferedBytes(n int64) Opt { return func(c *config) { c.maxBufBytes = n } }

// BlockOnBufferFull chooses whether Produce waits for room when the buffer
// is full (true, the default) or fails the record with ErrBufferFull.
func BlockOnBufferFull(block bool) Opt { return func(c *config) { c.blockOnFull = block } }

// RequiredAcks sets the acks of produce requests (default AllISRAcks).
func RequiredAcks(a Acks) Opt { return func(c *config) { c.acks = a } }

// Idempotent turns the idempotent producer on (the default) or off. On,
// every batch carries a producer id and per-partition sequence numbers, so
// that retries after timeouts and leader changes never write a record
// twice; it needs acks=all (RequiredAcks(AllISRAcks), the default). Left
// unset with other acks, the producer is not idempotent; set to true with
// them, New fails.
func Idempotent(on bool) Opt {
	return func(c *config) { c.idempotent, c.idempotentSet = on, true }
}

// MaxInFlightPerPartition is how many produce requests carrying a
// partition's batches may be in flight at once (Kafka's
// max.in.flight.requests.per.connection, counted per partition). The
// default is 5 for the idempotent producer, which also keeps at most 5
// batches of a partition unresolved (the ones a broker remembers), so more
// is refused by New; it is 1 without idempotence, where a retry behind
// another request in flight could land after it. Records of a partition
// are called back in the order produced either way.
func MaxInFlightPerPartition(n int) Opt {
	return func(c *config) { c.maxInFlight, c.maxInFlightSet = n, true }
}

// RetryUnknownOutcome lets a producer without idempotence (Idempotent
// off, or acks other than all) retry a batch whose attempt ended with its
// outcome unknown: sent with no answer before the stream broke or the
// request timed out, or answered with Error.OutcomeUnknown (appended by
// a leader that could not commit it). That is the behaviour of Kafka's
// producer without idempotence: records are then written at least once,
// and may be in the log twice. Off (the default), such a batch fails at
// once with ErrUnknownOutcome and the application decides. An idempotent
// producer always retries, since the broker recognises a retry.
func RetryUnknownOutcome(on bool) Opt { return func(c *config) { c.retryUnknown = on } }

// RecordPartitioner sets how records are spread over partitions (default
// DefaultPartitioner: murmur2 of the key, sticky for keyless records).
func RecordPartitioner(p Partitioner) Opt { return func(c *config) { c.partitioner = p } }

// Compression sets the codec of produced batches (default none).
func Compression(codec Codec) Opt { return func(c *config) { c.codec = codec } }

// FetchMaxWait is how long a fetch long-polls for data (default 500ms).
func FetchMaxWait(d time.Duration) Opt { return func(c *config) { c.fetchMaxWait = d } }

// FetchMinBytes is how much data a fetch waits for (default 1).
func FetchMinBytes(n int32) Opt { return func(c *config) { c.fetchMinBytes = n } }

// ReadCommitted makes consumers read only committed transactions'
// records (and records of no transaction), up to each partition's last
// stable offset: Kafka's isolation.level=read_committed. It is the group
// consumer's default; a Consumer (partitions assigned by the
// application) reads uncommitted records unless given this, as Kafka's
// consumers do. Transaction markers are never returned either way.
func ReadCommitted() Opt {
	return func(c *config) { c.isolation, c.isolationSet = quirev1.IsolationLevel_READ_COMMITTED, true }
}

// ReadUncommitted makes consumers, group consumers too, read every
// record up to the high watermark, aborted and still open transactions'
// too: Kafka's isolation.level=read_uncommitted.
func ReadUncommitted() Opt {
	return func(c *config) { c.isolation, c.isolationSet = quirev1.IsolationLevel_READ_UNCOMMITTED, true }
}

// FetchMaxBytes caps one fetch response (default 16 MiB).
func FetchMaxBytes(n int32) Opt { return func(c *config) { c.fetchMaxBytes = n } }

// FetchMaxPartitionBytes caps one partition in a fetch (default 4 MiB).
func FetchMaxPartitionBytes(n int32) Opt { return func(c *config) { c.fetchPartMaxBytes = n } }

// FetchBufferedPolls is how many fetch responses the consumer reads ahead
// of Poll (default 4).
func FetchBufferedPolls(n int) Opt { return func(c *config) { c.fetchBufferedPolls = n } }

// ConsumeResetOffset is where a consumer restarts a partition whose offset
// fell out of range (default AtStart): Kafka's auto.offset.reset earliest
// (AtStart) or latest (AtEnd).
func ConsumeResetOffset(o Offset) Opt {
	return func(c *config) { c.resetOffset, c.resetNone = o, false }
}

// ConsumeResetNone makes a consumer report an offset out of range instead
// of restarting elsewhere (Kafka's auto.offset.reset=none): Poll returns
// the OFFSET_OUT_OF_RANGE error, whose message gives the valid range, and
// the partition tries the same offset again after the retry backoff. A
// GroupConsumer whose GroupConfig.Reset is NoReset does so whatever the
// client's option.
func ConsumeResetNone() Opt { return func(c *config) { c.resetNone = true } }
