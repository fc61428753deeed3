// Package replicagrpc carries the replica fetch over gRPC, both ends: the
// internal ReplicaService's messages turned into the replica package's
// plain types and back (convert.go), the answer's codec that sends the
// records straight from the leader's read buffers and receives them into
// one pooled buffer (codec.go), and a follower's fetch session over one
// ReplicaFetchStream per fetcher (session.go). The replica package itself
// imports no gRPC; the broker's service methods are thin adapters over
// this package and replica.Manager.
package replicagrpc
