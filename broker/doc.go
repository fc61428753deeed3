// Package broker is a Quire node: its wiring, config and gRPC front end.
//
// New opens the data directory (storage); Start listens on one port and
// serves the quire.v1 services (Admin, Producer, Consumer, Metadata,
// Groups, Security), health, reflection and the internal ones (raft
// transport, controller RPCs, ReplicaService); joins the metadata quorum and
// registers (quorum.go); builds the replica manager (replica.New, given
// the cluster as its controller, registry and peers: replica_deps.go,
// peers.go) and reconciles it with every metadata image (watcher.go); and
// runs the background work (retention, flushes, checkpoints, ISR checks).
//
// Every call gets a principal before a service sees it (SCRAM credentials,
// else a verified client certificate's subject, else User:ANONYMOUS:
// auth.go); with authorizer.enable, each public call is checked against
// the ACLs of the metadata image (authz.go).
//
// The gRPC services are adapters: they check and route requests (a
// partition led elsewhere is passed on: route.go), turn wire messages into
// the replica package's calls and results (produce.go, fetch.go,
// replica_service.go) and errors into statuses (errors.go). Controller
// calls go through controlplane.Forwarder (one generic Call, bounded by
// metadata.write.timeout.ms), and DescribeTopics asks every leader for its
// offsets (describe.go).
// Replication itself (HW, ISR, fetchers) lives in package replica.
package broker
