package request

import (
	"errors"
	"fmt"

	"github.com/quirelog/quire/record"
)

// ErrTransactionsUnsupported refuses a batch with the transactional
// attribute: the cluster has no transaction coordinator, so nothing would
// ever commit or abort it, and a read_committed consumer would stop at
// its offset for good. Both doors answer it UNSUPPORTED_VERSION, as
// Kafka's door answers a transactional InitProducerId and FindCoordinator:
// final, and no lie about permissions or the request's form.
var ErrTransactionsUnsupported = errors.New("request: transactions are not supported by this cluster (no transaction coordinator); idempotent producers are")

// checkNotTransactional refuses raw batches of which any is transactional.
// A batch too damaged to read is left to the append, which reports the
// damage.
func checkNotTransactional(topic string, p int32, batches []byte) error {
	for len(batches) >= record.HeaderSize {
		h, err := record.ParseHeader(batches)
		if err != nil {
			return nil
		}
		if h.Transactional() {
			return fmt.Errorf("%w: %s-%d: the batch at base offset %d of producer %d is transactional",
				ErrTransactionsUnsupported, topic, p, h.BaseOffset, h.ProducerID)
		}
		n := h.Size()
		if n <= 0 || n > len(batches) {
			return nil
		}
		batches = batches[n:]
	}
	return nil
}
