package request

import (
	"sync"

	"github.com/quirelog/quire/share"
)

type shareTP struct {
	topic     string
	partition int32
}

// shareStats counts what this node's share operations did: the records
// acquired and redelivered, acknowledged by type, and dead-lettered (for
// the metrics; describe reads the counts saved with each
// share-partition's state). Its zero value is ready.
type shareStats struct {
	mu                    sync.Mutex
	acquired, redelivered int64
	acks                  [5]int64 // by share.AckType, 1 to 4
	dead                  int64
}

func (s *shareStats) onAcquired(got []share.AcquiredRange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range got {
		n := a.Last - a.First + 1
		s.acquired += n
		if a.DeliveryCount > 1 {
			s.redelivered += n
		}
	}
}

func (s *shareStats) onAcked(acks []share.Ack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range acks {
		if a.Type >= 1 && int(a.Type) < len(s.acks) {
			s.acks[a.Type] += a.Last - a.First + 1
		}
	}
}

func (s *shareStats) onDead(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead += int64(n)
}

func (s *shareStats) snapshot() ShareStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ShareStats{Acquired: s.acquired, Redelivered: s.redelivered, DeadLettered: s.dead, Acks: map[share.AckType]int64{}}
	for t := share.Accept; t <= share.Renew; t++ {
		out.Acks[t] = s.acks[t]
	}
	return out
}
