package client

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// metadataAsk is how many brokers a metadata refresh asks at once, and
// metadataGrace how long it waits for the others once one has answered
// (by default: tests may wait longer).
// One broker's image can be behind the cluster's: a broker cut off from
// the controller keeps answering from the image it had, naming itself
// leader of partitions that have moved on. Asking two and keeping the
// newer answer (higher metadata index; a broker that knows it is out of
// touch says stale) means one such broker cannot keep a client routing to
// a replaced leader.
const (
	metadataAsk   = 2
	metadataGrace = 150 * time.Millisecond
)

type metadataAnswer struct {
	resp *quirev1.GetMetadataResponse
	err  error
}

// newestMetadata asks up to metadataAsk brokers for req at once (in turn
// through the known brokers and seeds, starting from a different one each
// time) and returns the newest answer: not stale before stale, then the
// highest metadata index. Once one broker has answered, the others get
// metadataGrace to answer too; brokers that fail with a network error or
// time out are replaced by the next ones, as anyBroker does.
func (c *Client) newestMetadata(ctx context.Context, req *quirev1.GetMetadataRequest) (*quirev1.GetMetadataResponse, error) {
	addrs := c.brokerAddrs()
	if len(addrs) == 0 {
		return nil, ErrNoBrokers
	}
	start := int(c.metaTurn.Add(1)) % len(addrs)
	addrs = append(addrs[start:], addrs[:start]...)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan metadataAnswer, len(addrs))
	ask := func(addr string) {
		cc, err := c.conn(addr)
		if err != nil {
			answers <- metadataAnswer{err: err}
			return
		}
		rctx, rcancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
		defer rcancel()
		resp, err := quirev1.NewMetadataClient(cc).GetMetadata(rctx, req)
		answers <- metadataAnswer{resp: resp, err: fromStatus(err)}
	}
	next, pending := 0, 0
	for next < len(addrs) && pending < metadataAsk {
		go ask(addrs[next])
		next++
		pending++
	}
	var best *quirev1.GetMetadataResponse
	var last error
	var grace <-chan time.Time
	for pending > 0 {
		select {
		case a := <-answers:
			pending--
			if a.err == nil && a.resp.GetMetadataIndex() < req.GetMinMetadataIndex() {
				// A broker that does not know min_metadata_index answers
				// from an older image anyway.
				a = metadataAnswer{err: newError(quirev1.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf(
					"metadata at index %d, older than the %d this client has seen", a.resp.GetMetadataIndex(), req.GetMinMetadataIndex()))}
			}
			switch {
			case a.err == nil:
				if newer(a.resp, best) {
					best = a.resp
				}
				if grace == nil {
					t := time.NewTimer(c.cfg.metadataGrace)
					defer t.Stop()
					grace = t.C
				}
			case ctx.Err() != nil:
				return nil, ctx.Err()
			default:
				last = a.err
				code := ErrorCode(a.err)
				if code != quirev1.ErrorCode_NETWORK_EXCEPTION && code != quirev1.ErrorCode_REQUEST_TIMED_OUT && best == nil && pending == 0 {
					return nil, a.err
				}
				if best == nil && next < len(addrs) {
					go ask(addrs[next])
					next++
					pending++
				}
			}
		case <-grace:
			pending = 0
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if best != nil {
		return best, nil
	}
	if last == nil {
		last = ErrNoBrokers
	}
	return nil, last
}

// sawMetadataIndex raises the index metadata refreshes ask for to i (an
// admin call's answer).
func (c *Client) sawMetadataIndex(i uint64) {
	for {
		cur := c.minMetaIndex.Load()
		if i <= cur || c.minMetaIndex.CompareAndSwap(cur, i) {
			return
		}
	}
}

// newer reports whether answer a is to be preferred to b (nil: none yet).
func newer(a, b *quirev1.GetMetadataResponse) bool {
	if b == nil {
		return true
	}
	if a.GetStale() != b.GetStale() {
		return !a.GetStale()
	}
	return a.GetMetadataIndex() > b.GetMetadataIndex()
}
