package client

import "time"

// PeakInFlight returns the most requests, and batches, of one partition
// the producer had in flight at once.
func PeakInFlight(c *Client) (requests, batches int) {
	return int(c.prod.peakRequests.Load()), int(c.prod.peakBatches.Load())
}

// CallbacksWaiting returns how many records are settled and wait for the
// callbacks of a partition's earlier records to return.
func CallbacksWaiting(c *Client) int {
	n := 0
	for _, pp := range c.prod.partitions() {
		pp.mu.Lock()
		for _, b := range pp.done {
			n += len(b.recs)
		}
		pp.mu.Unlock()
	}
	return n
}

// SetSendHook makes every produce request call f before it is encoded (nil:
// none).
func SetSendHook(f func()) { sendHook = f }

// GivenUpWhileSending returns how many requests were given up at a
// replaced leader while its sink was still encoding them.
func GivenUpWhileSending(c *Client) int { return int(c.prod.givenUpSending.Load()) }

// MetadataGrace sets how long a metadata refresh waits for the other
// brokers it asked once one has answered.
func MetadataGrace(d time.Duration) Opt { return func(c *config) { c.metadataGrace = d } }
