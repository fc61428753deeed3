package client

// PeakInFlight returns the most requests, and batches, of one partition
// the producer had in flight at once.
func PeakInFlight(c *Client) (requests, batches int) {
	return int(c.prod.peakRequests.Load()), int(c.prod.peakBatches.Load())
}
