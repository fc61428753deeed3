// Package sharee2e drives franz-go's share consumer (kgo.ShareGroup)
// against a running node, for scripts/e2e_kafka.sh: its one test runs
// when the script names the node (QUIRE_SHARE_ADDR) and is skipped
// otherwise. It imports nothing of the node's, so the script builds it
// quickly.
package sharee2e
