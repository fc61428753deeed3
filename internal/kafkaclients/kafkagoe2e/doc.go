// Package kafkagoe2e drives segmentio/kafka-go's group consumer against a
// running node, for scripts/e2e_kafka.sh: its one test runs when the
// script names the node (QUIRE_KAFKAGO_ADDR) and is skipped otherwise.
// It imports nothing of the node's, so the script builds it quickly.
package kafkagoe2e
