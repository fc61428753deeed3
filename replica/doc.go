// Package replica hosts the partition replicas of one broker and keeps
// them in step with each other: the replica manager (Manager, one
// Partition per hosted replica over one storage.Log), the leader's append,
// high watermark, ISR and the waiters on them (acks=all produces,
// long-polling consumer and follower fetches), the follower's fetchers
// (one per leader broker) and the leader's side of their fetch
// (HandleFetch), and the reconciling of the metadata image, as a View,
// into leader and follower roles (Reconcile).
//
// It knows no network protocol. Its dependencies come in through New as
// small interfaces (deps.go): the partition logs (Logs, the storage
// manager), the controller's AlterPartition (Controller), the brokers'
// registrations (Brokers) and a follower fetch to a leader by broker id
// (Peers, or a session per fetcher with SessionPeers); requests and answers are plain types (FetchRequest,
// AppendResult), so any front end can drive it: the broker's gRPC
// services today. It imports storage and record of this module and no
// gRPC, raft or metadata package (internal/lint says so).
//
// Locks (docs/locking.md): Partition.appendMu, then Partition.mu, then
// the storage.Log's own; Manager.mu is never held while taking a
// Partition's.
package replica
