// Package broker is a Quire node: its wiring, config and listeners.
//
// New opens the data directory (storage); Start listens and serves, on
// gRPC listeners, the quire.v1 services (package service, over the
// request core: core.go), health, reflection and the internal ones (raft
// transport, controller RPCs, ReplicaService), and on the Kafka
// listeners Kafka's protocol (package kafka, whose backend over the core
// is kafka*.go); joins the metadata quorum and registers (quorum.go);
// builds the replica manager (replica.New, given the cluster as its
// controller, registry and peers: replica_deps.go, peers.go) and
// reconciles it with every metadata image (watcher.go); and runs the
// background work (retention, flushes, checkpoints, ISR checks).
//
// Every call gets a principal before a service sees it (SCRAM credentials,
// else a verified client certificate's subject, else User:ANONYMOUS:
// auth.go); with authorizer.enable, the request core authorizes what it
// serves and the interceptor checks every other public call against the
// ACLs of the metadata image (authz.go).
//
// The request core reaches the rest of the node through the adapters of
// core*.go: the controller through controlplane.Forwarder (one generic
// Call, bounded by metadata.write.timeout.ms), other brokers over the
// node-to-node connections (a partition led elsewhere passed on once:
// route.go), and DescribeTopics asks every leader for its offsets
// (describe.go). Replication itself (HW, ISR, fetchers) lives in package
// replica.
package broker
