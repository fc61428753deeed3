// Package request is the request core: every client operation once, in
// plain Go types and typed errors, knowing nothing of gRPC or of Kafka's
// bytes. The doors (the gRPC services, the Kafka listener and the
// Subscribe stream's group member) turn their wire requests into the
// core's, call it, and turn its answers and errors into their own: a
// gRPC status or quire.v1.Error at the gRPC edge, a Kafka error code at
// the Kafka edge, both read off the same *Error.
//
// The core authorizes each operation once, with the principal the door
// put into the context (WithPrincipal), so every door enforces the same
// ACLs by construction. It reaches the replicas through replica.Partition,
// the cluster's metadata and this broker's session with the controller
// through Cluster, and other brokers only through Forwarder, which the
// broker implements over its node-to-node connections.
//
// Today the core serves the data path: Produce (with acks, idempotence
// and forwarding batched per leader), InitProducerID, Fetch (long-polled), ListOffsets and
// DeleteRecords; and DescribeTopics, with its fan-out to the leaders.
//
// It serves the consumer groups' calls too (groups.go, group_reset.go),
// passed to the group coordinator through GroupCoordinator, the
// administration of users and ACLs (security.go) through SecurityStore,
// and topic, config and cluster administration (topics.go, configs.go,
// cluster.go), writing through the Controller the broker implements over
// the cluster's controller.
package request
