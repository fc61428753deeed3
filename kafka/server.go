package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/internal/fetchbuf"
	"github.com/quirelog/quire/request"
)

// Errors of this package.
var (
	// ErrServerClosed is returned by Serve once Close was called.
	ErrServerClosed = errors.New("kafka: server closed")
	// ErrUnsupported is a request for an API or version not served.
	ErrUnsupported = errors.New("kafka: api or version not served")
	// ErrMalformed is a request that cannot be parsed.
	ErrMalformed = errors.New("kafka: malformed request")
)

// Node is a broker as a Kafka client is sent to it: its node id and
// its address (host:port) on the listener the connection came in on.
type Node struct {
	ID   int32
	Addr string
}

// Backend is what the server translates Kafka's requests into, in
// process: the request core's operations, in its plain Go types. Its
// errors are the core's *request.Error, whose code is Kafka's wherever
// Kafka has the code; an error the core did not code is a call cut
// short by its context, request.ErrLeaderUnreachable, or else
// UNKNOWN_SERVER_ERROR (errors.go).
type Backend interface {
	// Metadata is the request core's: the brokers with an address on the
	// listener the connection came in on (fenced ones left out), each
	// broker's Addr that address; a topic refused is answered alone.
	Metadata(ctx context.Context, req *request.MetadataRequest) (*request.MetadataResult, error)
	Produce(ctx context.Context, req *request.ProduceRequest) ([]request.ProduceResult, error)
	Fetch(ctx context.Context, req *request.FetchRequest) ([]request.FetchResult, error)
	ListOffsets(ctx context.Context, parts []request.ListOffsetsPartition) ([]request.ListOffsetsResult, error)
	DeleteRecords(ctx context.Context, req *request.DeleteRecordsRequest) ([]request.DeleteRecordsResult, error)
	InitProducerID(ctx context.Context, req request.InitProducerIDRequest) (request.InitProducerIDResult, error)
	// Coordinator is the broker a group's clients are sent to, with its
	// address on the connection's listener: any node takes a group's
	// requests. The core refuses it for a group the caller may not
	// describe; no broker with that listener is COORDINATOR_NOT_AVAILABLE.
	Coordinator(ctx context.Context, group string) (Node, error)
	// The group calls are the request core's (request/groups.go).
	ConsumerGroupHeartbeat(ctx context.Context, hb *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error)
	DescribeGroup(ctx context.Context, group string) (*request.GroupDescription, error)
	ListGroups(ctx context.Context) ([]request.GroupListing, error)
	CommitOffsets(ctx context.Context, req *request.CommitOffsetsRequest) (time.Time, error)
	FetchOffsets(ctx context.Context, group string, parts []request.GroupPartition) ([]request.CommittedOffset, error)

	// The admin APIs (admin.go).
	AdminBackend
	// The share-group calls are the request core's (request/share.go);
	// served only with Config.ShareGroups. ShareLockDuration is the
	// group's record lock duration, which a share fetch answers.
	ShareGroupHeartbeat(ctx context.Context, hb *request.ShareHeartbeat) (*request.ShareHeartbeatResult, error)
	ShareFetch(ctx context.Context, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error)
	ShareAcknowledge(ctx context.Context, group, member string, parts []request.SharePartition) ([]request.ShareAckResult, error)
	ShareLockDuration(group string) time.Duration
	// ShareRelease: the core's, releasing what a member holds on the
	// partitions of a share session that closed (share.go).
	ShareRelease(ctx context.Context, group, member string, parts []request.SharePartition) error
	// ShareGroupDescribe: the core's, for ShareGroupDescribe (77).
	ShareGroupDescribe(ctx context.Context, group string) (*request.ShareGroupDescription, error)
	// DeleteShareGroupOffsets: the core's, for DeleteShareGroupOffsets
	// (92): each topic's refusal in its result.
	DeleteShareGroupOffsets(ctx context.Context, group string, topics []string) ([]request.ShareTopicResult, error)
	// DescribeShareGroupOffsets and AlterShareGroupOffsets: the core's,
	// for the APIs of the same names (90, 91): each partition's refusal
	// in its result. No topics (nil): every share-partition of the group.
	DescribeShareGroupOffsets(ctx context.Context, group string, topics []request.ShareOffsetTopic) ([]request.ShareOffset, error)
	AlterShareGroupOffsets(ctx context.Context, group string, offsets []request.ShareStartOffset) ([]request.ShareOffset, error)
	// OffsetForLeaderEpoch is, at the partition's leader, the largest
	// leader epoch at or below epoch that its log has and the offset
	// where that epoch ends (the next one's start, or the log end
	// offset for the latest); -1, -1 for an epoch the log does not know.
	// currentLeaderEpoch, when not -1, is the client's view of the
	// partition's leader epoch, checked first (FENCED_LEADER_EPOCH,
	// UNKNOWN_LEADER_EPOCH). Errors are the request core's
	// *request.Error (NOT_LEADER_OR_FOLLOWER,
	// UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, ...).
	OffsetForLeaderEpoch(ctx context.Context, topic string, partition, currentLeaderEpoch, epoch int32) (leaderEpoch int32, endOffset int64, err error)
	// Transactions (transactions.go).
	TxnBackend
}

// Config configures a Server.
type Config struct {
	Backend Backend
	// ShareGroups serves the share-group APIs (share.go); without, they
	// are neither advertised nor answered.
	ShareGroups bool
	// MaxRequestBytes bounds a request's size (Kafka's
	// socket.request.max.bytes); a larger one closes the connection. The
	// body is read in steps as its bytes arrive, so a size claimed but
	// not sent costs nothing.
	MaxRequestBytes int
	// MaxConnections caps the connections open at once on each listener
	// (Kafka's max.connections); MaxConnectionsPerIP caps those from one
	// client address over all the listeners (max.connections.per.ip). A
	// connection past either is closed as it is accepted. 0 is no cap.
	MaxConnections      int
	MaxConnectionsPerIP int
	// Refused, when set, is told of each connection closed at accept by
	// a cap: reason is "max.connections" or "max.connections.per.ip".
	Refused func(reason string)
	// IdleTimeout closes a connection that sends no request for this long
	// (Kafka's connections.max.idle.ms), or does not take an answer for
	// this long; 0 is 10 minutes.
	IdleTimeout time.Duration
	// ConnContext returns the context the requests of a new connection run
	// under, derived from ctx (the broker tags it with the listener, so
	// Metadata gives that listener's addresses); nil keeps ctx.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// Observe, when set, is told of every request handled: its API
	// ("kafka/Produce"), when its handling began, and nil, or the error
	// of one that closed the connection (wrapping ErrUnsupported for an
	// API or version not served, ErrMalformed for one that does not
	// parse). The broker counts them with its gRPC calls.
	Observe func(api string, start time.Time, err error)
	Logger  hclog.Logger
}

// Server serves Kafka's protocol on listeners until Close.
type Server struct {
	cfg    Config
	ctx    context.Context // cancelled by Close: ends long polls
	cancel context.CancelFunc

	shares shareSessions // share.go

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]int // open connections of each
	conns     map[net.Conn]connInfo
	perIP     map[string]int // open connections by client address
	wg        sync.WaitGroup // connection goroutines
	// refusals logged: the last log line, and those refused since
	// without one (a flood gets a line a second).
	refusedLogged time.Time
	refusedQuiet  int
	// saslOf holds the listeners served with ServeSASL (sasl.go).
	saslOf map[net.Listener]*SASL
}

// connInfo is what a tracked connection is counted under.
type connInfo struct {
	lis net.Listener
	ip  string
}

// NewServer returns a server that serves nothing until Serve.
func NewServer(cfg Config) *Server {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]int{}, conns: map[net.Conn]connInfo{}, perIP: map[string]int{}}
}

// Serve accepts connections on lis until Close, then returns
// ErrServerClosed; another accept error is returned as it is.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = lis.Close()
		return ErrServerClosed
	}
	s.listeners[lis] = 0
	s.mu.Unlock()
	var backoff time.Duration
	for {
		c, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of descriptors and the like: wait and go on, as
				// net/http and gRPC do.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.cfg.Logger.Warn("accept failed; retrying", "error", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
				}
				continue
			}
			return err
		}
		backoff = 0
		switch s.track(lis, c) {
		case errServerClosing:
			_ = c.Close()
			return ErrServerClosed
		case "":
			go s.serveConn(c)
		}
	}
}

// errServerClosing is track's answer once the server is closed.
const errServerClosing = "closed"

// track registers a connection accepted on lis and returns ""; or, for
// one past a cap, closes it and returns the cap's name; or
// errServerClosing.
func (s *Server) track(lis net.Listener, c net.Conn) string {
	ip := clientIP(c.RemoteAddr())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errServerClosing
	}
	refused := ""
	switch {
	case s.cfg.MaxConnections > 0 && s.listeners[lis] >= s.cfg.MaxConnections:
		refused = "max.connections"
	case s.cfg.MaxConnectionsPerIP > 0 && s.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
		refused = "max.connections.per.ip"
	default:
		s.listeners[lis]++
		s.perIP[ip]++
		s.conns[c] = connInfo{lis: lis, ip: ip}
		s.wg.Add(1)
	}
	open, fromIP := s.listeners[lis], s.perIP[ip]
	logIt, quiet := false, 0
	if refused != "" {
		if now := time.Now(); now.Sub(s.refusedLogged) >= time.Second {
			logIt, quiet = true, s.refusedQuiet
			s.refusedLogged, s.refusedQuiet = now, 0
		} else {
			s.refusedQuiet++
		}
	}
	s.mu.Unlock()
	if refused == "" {
		return ""
	}
	// Counted before the close, so whoever sees the connection end sees
	// the refusal counted.
	if s.cfg.Refused != nil {
		s.cfg.Refused(refused)
	}
	_ = c.Close()
	if logIt {
		s.cfg.Logger.Warn("connection refused: too many connections", "client", c.RemoteAddr().String(),
			"limit", refused, "listener_connections", open, "client_connections", fromIP,
			"max_connections", s.cfg.MaxConnections, "max_connections_per_ip", s.cfg.MaxConnectionsPerIP,
			"refused_unlogged", quiet)
	}
	return refused
}

// untrack forgets a connection that ended.
func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.conns[c]
	if !ok {
		return
	}
	delete(s.conns, c)
	if _, ok := s.listeners[info.lis]; ok {
		s.listeners[info.lis]--
	}
	if s.perIP[info.ip]--; s.perIP[info.ip] <= 0 {
		delete(s.perIP, info.ip)
	}
}

// clientIP is the host of a client's address, the key of
// max.connections.per.ip.
func clientIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// closeGrace bounds how long Close waits for an answer being written to
// a client that does not read it.
const closeGrace = 5 * time.Second

// Close stops accepting and ends the long polls; each connection answers
// the request it is handling, if any, and closes, and Close waits for
// them.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	for l := range s.listeners {
		_ = l.Close()
	}
	now := time.Now()
	for c := range s.conns {
		// Under mu, as serveConn arms its deadlines: an idle connection's
		// read ends now, a busy one stops at its next read.
		_ = c.SetReadDeadline(now)
		_ = c.SetWriteDeadline(now.Add(closeGrace))
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// armRead sets c's read deadline for the next request; false once the
// server is closing.
func (s *Server) armRead(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
	return true
}

// armWrite sets c's write deadline for an answer: a client that stops
// reading is dropped after the idle timeout, or closeGrace once the
// server is closing.
func (s *Server) armWrite(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.cfg.IdleTimeout
	if s.closed {
		d = closeGrace
	}
	_ = c.SetWriteDeadline(time.Now().Add(d))
}

// serveConn answers one connection's requests in order until it closes.
// Each answer is written as soon as it is made, before the next request
// is read: the next may be a long poll, or an acks=0 produce that gets
// no answer to carry this one out.
func (s *Server) serveConn(c net.Conn) {
	ctx := s.ctx
	if s.cfg.ConnContext != nil {
		ctx = s.cfg.ConnContext(ctx, c)
	}
	cs := connState{sasl: s.newSASLConn(c)}
	defer func() {
		_ = c.Close()
		// No request of the connection is under way: what its share
		// sessions hold goes back to their groups.
		s.releaseShareSessions(cs.connContext(ctx), &cs)
		s.untrack(c)
		s.wg.Done()
	}()
	log := s.cfg.Logger.With("client", c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	var sizeBuf [4]byte
	var out []byte
	for s.armRead(c) {
		if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				log.Debug("connection ended", "error", err)
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if limit := s.maxRequestBytes(&cs); size < cs.minRequestBytes() || int(size) > limit {
			log.Warn("closing connection: request size out of bounds", "size", size, "max", limit)
			return
		}
		// A request's bytes are read in full before it is handled, into
		// a buffer of its own (a produce's records alias it).
		buf, err := readBody(r, int(size))
		if err != nil {
			log.Debug("connection ended mid-request", "error", err, "size", size)
			return
		}
		out, err = s.handle(cs.connContext(ctx), &cs, buf, out[:0])
		if err != nil {
			log.Warn("closing connection", "error", err)
			return
		}
		if len(out) == 0 {
			continue // acks=0: no answer
		}
		s.armWrite(c)
		_, err = c.Write(out)
		if cap(out) > keptAnswerBytes {
			// A large answer's buffer is not held while idle: it goes
			// back to the fetch buffers' pool, for the next large fetch.
			putAnswer(out)
			out = nil
		}
		if err != nil {
			log.Debug("connection ended while answering", "error", err)
			return
		}
		if cs.closeAfterAnswer() {
			log.Debug("closing connection after a failed SASL authentication")
			return
		}
	}
}

// keptAnswerBytes is the largest answer buffer a connection keeps for
// its next answer; a larger one (a big fetch) is given back once written.
const keptAnswerBytes = 64 << 10

// pooledAnswerBytes is the largest answer buffer given back to the pool
// (internal/fetchbuf); a larger one is dropped.
const pooledAnswerBytes = 4 * fetchbuf.Size

// putAnswer gives back an answer buffer once written.
func putAnswer(out []byte) {
	if cap(out) <= pooledAnswerBytes {
		out = out[:0]
		fetchbuf.Put(&out)
	}
}

// fetchRoom returns out, or a buffer of the pool holding out, with room
// for f's answer: its records are most of it, and growing out by
// appending would allocate (and clear) a buffer of their size for each
// fetch.
func fetchRoom(out []byte, f *kmsg.FetchResponse) []byte {
	need := 64
	for i := range f.Topics {
		t := &f.Topics[i]
		need += 32 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			need += 64 + len(p.RecordBatches) + 16*len(p.AbortedTransactions)
		}
	}
	if cap(out)-len(out) >= need || len(out)+need > pooledAnswerBytes {
		return out
	}
	b := fetchbuf.Get(len(out) + need)
	return append((*b)[:0], out...)
}

// firstBodyRead is how much of a request body is allocated before any of
// it arrives; the buffer then doubles as the bytes come, up to the size
// the request claims.
const firstBodyRead = 64 << 10

// readBody reads a request body of size bytes from r. Its buffer grows
// with the bytes that actually arrive (firstBodyRead, then doubling), so
// a client claiming a large size and sending less costs at most four
// times what it sent (plus twice firstBodyRead), not what it claimed; a
// whole body costs at most about three times its size in allocations, of
// which its own size is kept.
func readBody(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, min(size, firstBodyRead))
	got := 0
	for {
		n, err := io.ReadFull(r, buf[got:])
		got += n
		if err != nil {
			return nil, fmt.Errorf("read %d of %d bytes: %w", got, size, err)
		}
		if got == size {
			return buf, nil
		}
		next := make([]byte, min(size, 2*len(buf)))
		copy(next, buf)
		buf = next
	}
}

// header is a request header.
type header struct {
	key, version int16
	correlation  int32
	clientID     string
}

// parseHeader reads a request header off buf and returns the body. The
// header is version 1 (key, version, correlation id, nullable client id)
// and, for the flexible versions of the API, version 2: tagged fields
// after the client id.
func parseHeader(buf []byte) (header, kmsg.Request, []byte, error) {
	var h header
	if len(buf) < 10 {
		return h, nil, nil, fmt.Errorf("%w: %d bytes, shorter than a request header", ErrMalformed, len(buf))
	}
	h.key = int16(binary.BigEndian.Uint16(buf))
	h.version = int16(binary.BigEndian.Uint16(buf[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(buf[4:]))
	n := int16(binary.BigEndian.Uint16(buf[8:]))
	rest := buf[10:]
	if n >= 0 {
		if int(n) > len(rest) {
			return h, nil, nil, fmt.Errorf("%w: client id of %d bytes, %d left", ErrMalformed, n, len(rest))
		}
		h.clientID, rest = string(rest[:n]), rest[n:]
	} else if n != -1 {
		return h, nil, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, n)
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, nil, nil, fmt.Errorf("%w: api key %d", ErrUnsupported, h.key)
	}
	req.SetVersion(h.version)
	if h.version >= 0 && h.version <= req.MaxVersion() && req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, nil, err
		}
	}
	return h, req, rest, nil
}

// decodeBody decodes a request's body into req, once scanBody has found
// that doing so costs no more than the bound the package doc gives.
func decodeBody(h header, req kmsg.Request, body []byte) error {
	if _, err := scanBody(h.key, h.version, body); err != nil {
		return fmt.Errorf("%w: %s version %d: %v", ErrMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %s version %d: %v", ErrMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	return nil
}

// skipTags skips a tagged-field section: a count, then each field's tag,
// size and bytes, all unsigned varints but the bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: tagged fields", ErrMalformed)
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: tagged field tag", ErrMalformed)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: tagged field size", ErrMalformed)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// connState is what a connection's requests tell of it, kept by its
// goroutine.
type connState struct {
	// classic is set once the client speaks the classic group protocol
	// (JoinGroup and the rest) on the connection.
	classic bool
	// sasl is the connection's authentication (sasl.go); nil on a
	// listener that requires none.
	sasl *saslConn
	// held is the answer being made's fetch results, whose pooled
	// buffers its records are in until it is framed.
	held []request.FetchResult
	// shares are the share sessions the connection opened (share.go),
	// released when it ends.
	shares map[shareSessionKey]*shareSession
}

// handle answers one request, appending the framed answer to out; an
// empty answer is none (acks=0), an error closes the connection.
func (s *Server) handle(ctx context.Context, cs *connState, buf, out []byte) (_ []byte, err error) {
	if cs.sasl != nil && cs.sasl.raw {
		return s.rawToken(cs, buf, out)
	}
	var start time.Time
	if s.cfg.Observe != nil {
		start = time.Now()
	}
	h, req, body, err := parseHeader(buf)
	if err != nil {
		return out, err
	}
	if s.cfg.Observe != nil {
		defer func() { s.cfg.Observe("kafka/"+kmsg.NameForKey(h.key), start, err) }()
	}
	if h.key == apiVersionsKey && !served(h.key, h.version) {
		// A client newer than this server: answer in version 0 what is
		// served, so it picks a version both know (KIP-511).
		resp := s.apiVersions(0)
		resp.ErrorCode = unsupportedVersion
		return frame(out, h, resp, false), nil
	}
	if !served(h.key, h.version) || (isShareKey(h.key) && !s.cfg.ShareGroups) {
		return out, fmt.Errorf("%w: %s (key %d) version %d from client %q", ErrUnsupported,
			kmsg.NameForKey(h.key), h.key, h.version, h.clientID)
	}
	if err := decodeBody(h, req, body); err != nil {
		return out, err
	}
	defer func() {
		request.Release(cs.held) // the records are copied into out, or not sent
		cs.held = nil
	}()
	resp, err := s.dispatch(ctx, cs, h.clientID, req)
	if err != nil {
		return out, err
	}
	if resp == nil {
		return out, nil
	}
	resp.SetVersion(h.version)
	return frame(out, h, resp, req.IsFlexible() && h.key != apiVersionsKey), nil
}

// frame appends a response: size, correlation id, the header's (empty)
// tagged fields when flexible, the body.
func frame(out []byte, h header, resp kmsg.Response, flexibleHeader bool) []byte {
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		out = fetchRoom(out, f)
	}
	start := len(out)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(h.correlation))
	if flexibleHeader {
		out = append(out, 0) // no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

// dispatch answers a parsed request; nil for none.
func (s *Server) dispatch(ctx context.Context, cs *connState, clientID string, req kmsg.Request) (kmsg.Response, error) {
	if cs.sasl != nil {
		if resp, handled, err := s.saslGate(ctx, cs, req); handled {
			return resp, err
		}
	}
	b := s.cfg.Backend
	switch req := req.(type) {
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		return saslOutside(req), nil
	case *kmsg.ApiVersionsRequest:
		return s.apiVersions(req.Version), nil
	case *kmsg.ShareGroupHeartbeatRequest:
		return shareGroupHeartbeat(ctx, b, req), nil
	case *kmsg.ShareFetchRequest:
		return s.shareFetch(ctx, b, cs, req), nil
	case *kmsg.ShareAcknowledgeRequest:
		return s.shareAcknowledge(ctx, b, cs, req), nil
	case *kmsg.ShareGroupDescribeRequest:
		return shareGroupDescribe(ctx, b, req), nil
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return deleteShareGroupOffsets(ctx, b, req), nil
	case *kmsg.DescribeShareGroupOffsetsRequest:
		return describeShareGroupOffsets(ctx, b, req), nil
	case *kmsg.AlterShareGroupOffsetsRequest:
		return alterShareGroupOffsets(ctx, b, req), nil
	case *kmsg.MetadataRequest:
		return metadata(ctx, b, req), nil
	case *kmsg.ProduceRequest:
		return produce(ctx, b, req)
	case *kmsg.FetchRequest:
		return fetch(ctx, b, cs, req), nil
	case *kmsg.ListOffsetsRequest:
		return listOffsets(ctx, b, req), nil
	case *kmsg.DeleteRecordsRequest:
		return deleteRecords(ctx, b, req), nil
	case *kmsg.InitProducerIDRequest:
		return initProducerID(ctx, b, req), nil
	case *kmsg.FindCoordinatorRequest:
		return findCoordinator(ctx, b, req), nil
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return consumerGroupHeartbeat(ctx, b, req), nil
	case *kmsg.OffsetCommitRequest:
		return offsetCommit(ctx, b, req, cs.classic), nil
	case *kmsg.JoinGroupRequest:
		cs.classic = true
		return joinGroup(ctx, b, clientID, req), nil
	case *kmsg.SyncGroupRequest:
		cs.classic = true
		return syncGroup(ctx, b, req), nil
	case *kmsg.HeartbeatRequest:
		cs.classic = true
		return heartbeat(ctx, b, req), nil
	case *kmsg.DescribeGroupsRequest:
		return describeGroups(ctx, b, req), nil
	case *kmsg.ListGroupsRequest:
		return listGroups(ctx, b, req), nil
	case *kmsg.LeaveGroupRequest:
		cs.classic = true
		return leaveGroup(ctx, b, req), nil
	case *kmsg.OffsetFetchRequest:
		return offsetFetch(ctx, b, req), nil
	case *kmsg.OffsetForLeaderEpochRequest:
		return offsetForLeaderEpoch(ctx, b, req), nil
	case *kmsg.AddPartitionsToTxnRequest:
		return addPartitionsToTxn(ctx, b, req), nil
	case *kmsg.AddOffsetsToTxnRequest:
		return addOffsetsToTxn(ctx, b, req), nil
	case *kmsg.TxnOffsetCommitRequest:
		return txnOffsetCommit(ctx, b, req), nil
	case *kmsg.EndTxnRequest:
		return endTxn(ctx, b, req), nil
	case *kmsg.DescribeTransactionsRequest:
		return describeTransactions(ctx, b, req), nil
	case *kmsg.ListTransactionsRequest:
		return listTransactions(ctx, b, req), nil
	case *kmsg.WriteTxnMarkersRequest:
		return writeTxnMarkers(ctx, b, req), nil
	}
	if resp, ok := adminDispatch(ctx, b, req); ok {
		return resp, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupported, kmsg.NameForKey(req.Key()))
}
