// Package kafka serves Kafka's wire protocol on a listener, so that Kafka
// clients (librdkafka and kcat, franz-go, the Java client) can produce to
// and consume from a node without a gRPC library.
//
// It is a translation layer over the request core (Backend: package
// request's operations and plain Go types), as the gRPC door is, not a
// second broker: the record batches pass through untouched in both
// directions (the log keeps Kafka's RecordBatch v2 bytes), the error
// codes are the core's (a request.Error's code is Kafka's number wherever
// Kafka has the code), and everything a gRPC client gets (routing, acks,
// idempotence, auto-created topics) a Kafka client gets too. It imports
// neither gRPC nor the quire.v1 API.
//
// The protocol: each request is a 4-byte big-endian size, a request header
// (api key, version, correlation id, client id, and tagged fields from the
// flexible versions on) and the body; each response is the size, the
// correlation id (and tagged fields, except for ApiVersions) and the body.
// A connection's requests are answered one at a time, in order, as Kafka
// does; an acks=0 produce gets no answer.
//
// Served, with the versions ApiVersions advertises (versions), are
// ApiVersions, Metadata, Produce, Fetch, ListOffsets, InitProducerId
// (idempotent producers, not transactional ones), and consumer groups in
// both protocols over the one coordinator: KIP-848's, the node's own
// (ConsumerGroupHeartbeat), and the classic one (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup; classic.go), with FindCoordinator, OffsetCommit
// and OffsetFetch, and the admin tools' DescribeGroups and ListGroups
// (describe.go). Transactions, other admin requests and SASL are not: a
// client asking for them finds them missing from ApiVersions. A request
// for an API or version not served closes the connection (it cannot be
// parsed), as Kafka does;
// ApiVersions of a newer version is answered in version 0 with
// UNSUPPORTED_VERSION, so the client can downgrade. Fetch sessions
// (KIP-227) are declined: every fetch is answered in full with session id
// 0, which clients take as sessionless.
//
// Untrusted bytes do not size memory. A request's size is checked against
// Config.MaxRequestBytes before its body is read, and the body is read
// into a buffer that grows as its bytes arrive. Before kmsg decodes it,
// the body is walked with its API's layout (bound.go, schemas.go): every
// string, bytes and array length is bounded by the bytes left, the arrays
// of a request by maxRequestElements elements in all, and what decoding
// will allocate by decodeFactor (k = 8) bytes per byte of the request plus
// decodeSlack; a request past any of them closes the connection.
// Connections are capped per listener (Config.MaxConnections) and per
// client address (Config.MaxConnectionsPerIP), and a connection keeps an
// answer buffer for its next answer only up to keptAnswerBytes.
package kafka
