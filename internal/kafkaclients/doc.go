// Package kafkaclients runs Kafka clients other than franz-go (the one
// the node's own tests speak with) against a node's Kafka listener, each
// with its own idea of the protocol: segmentio/kafka-go's group consumer,
// and requests as other clients send them; and, for scripts/e2e_kafka.sh,
// franz-go's share consumer against a running node (sharee2e). It has
// tests only; its clients are dependencies of the tests alone.
package kafkaclients
