package storage

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// modelBatch is a batch the naive model knows is in the log.
type modelBatch struct {
	pid                     int64
	epoch                   int16
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerModel is the naive model of the producer state: the list of
// every producer batch in the log, from which each rule is worked out
// afresh.
type producerModel struct{ batches []modelBatch }

// expect says what a leader append of one batch must do: an error, or
// a duplicate of a batch, or a new append.
func (m *producerModel) expect(pid int64, epoch int16, first, last int32) (*modelBatch, error) {
	var mine []modelBatch
	for _, b := range m.batches {
		if b.pid == pid {
			mine = append(mine, b)
		}
	}
	if len(mine) == 0 {
		if first != 0 {
			return nil, ErrUnknownProducerID
		}
		return nil, nil
	}
	cur := mine[len(mine)-1]
	switch {
	case epoch < cur.epoch:
		return nil, ErrInvalidProducerEpoch
	case epoch > cur.epoch:
		if first != 0 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	// The latest five at the current epoch.
	n := 0
	for i := len(mine) - 1; i >= 0 && n < ProducerWindow && mine[i].epoch == epoch; i-- {
		n++
		if mine[i].firstSeq == first && mine[i].lastSeq == last {
			return &mine[i], nil
		}
	}
	if first != incrementSequence(cur.lastSeq, 1) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

func (m *producerModel) truncate(offset int64) {
	k := 0
	for k < len(m.batches) && m.batches[k].firstOffset < offset {
		k++
	}
	m.batches = m.batches[:k]
}

// TestProducerModel drives a log with random leader appends (retries,
// gaps, epoch bumps, old epochs, sequences near the wrap), follower
// appends, truncations, rolls and restarts, and checks every answer and
// the producer list against the naive model.
func TestProducerModel(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		cfg := smallConfig()
		cfg.SegmentBytes = 1024
		l := openTest(t, t.TempDir(), cfg, 0)
		m := &producerModel{}
		ts := time.Now().UnixMilli()
		for op := 0; op < 400; op++ {
			switch r := rng.Intn(100); {
			case r < 3:
				l = reopen(t, l, cfg, Options{})
			case r < 6:
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case r < 10:
				cut := rng.Int63n(l.LogEndOffset() + 1)
				if err := l.Truncate(cut); err != nil {
					t.Fatal(err)
				}
				m.truncate(l.LogEndOffset())
			default:
				pid := int64(rng.Intn(3) + 1)
				epoch, first, n := pickBatch(rng, m, pid)
				b := producerBatch(pid, epoch, first, n, ts)
				last := incrementSequence(first, int32(n-1))
				if r < 20 {
					// A follower append of a batch the leader took.
					// Followers check nothing; it may start a producer
					// anywhere (its state had expired on this replica).
					if dup, err := m.expect(pid, epoch, first, last); (err != nil && !isErr(err, ErrUnknownProducerID)) || dup != nil {
						continue
					}
					info := appendFollower(t, l, b)
					m.batches = append(m.batches, modelBatch{pid, epoch, first, last, info.FirstOffset, info.LastOffset})
					continue
				}
				dup, wantErr := m.expect(pid, epoch, first, last)
				switch {
				case wantErr != nil:
					seen[wantErr.Error()]++
				case dup != nil:
					seen["duplicate"]++
				default:
					seen["new"]++
				}
				leo := l.LogEndOffset()
				info, err := l.AppendAsLeader(b, 0)
				switch {
				case wantErr != nil:
					if !isErr(err, wantErr) || l.LogEndOffset() != leo {
						t.Fatalf("seed %d op %d: producer %d epoch %d seq %d-%d: %+v %v, want %v",
							seed, op, pid, epoch, first, last, info, err, wantErr)
					}
				case dup != nil:
					if err != nil || !info.Duplicate || info.FirstOffset != dup.firstOffset || info.LastOffset != dup.lastOffset {
						t.Fatalf("seed %d op %d: producer %d epoch %d seq %d-%d: %+v %v, want duplicate of %+v",
							seed, op, pid, epoch, first, last, info, err, *dup)
					}
				default:
					if err != nil || info.Duplicate || info.FirstOffset != leo {
						t.Fatalf("seed %d op %d: producer %d epoch %d seq %d-%d: %+v %v, want appended at %d",
							seed, op, pid, epoch, first, last, info, err, leo)
					}
					m.batches = append(m.batches, modelBatch{pid, epoch, first, last, info.FirstOffset, info.LastOffset})
				}
			}
			checkModelProducers(t, l, m)
		}
		l.Close()
	}
	for _, k := range []string{"new", "duplicate", ErrOutOfOrderSequence.Error(), ErrInvalidProducerEpoch.Error(), ErrUnknownProducerID.Error()} {
		if seen[k] == 0 {
			t.Errorf("no append was %q: %v", k, seen)
		}
	}
	t.Logf("outcomes: %v", seen)
}

// pickBatch chooses a batch for pid: mostly the next one, else a retry,
// a gap, an epoch bump, an old epoch or a fresh start.
func pickBatch(rng *rand.Rand, m *producerModel, pid int64) (epoch int16, first int32, n int) {
	n = rng.Intn(3) + 1
	var mine []modelBatch
	for _, b := range m.batches {
		if b.pid == pid {
			mine = append(mine, b)
		}
	}
	if len(mine) == 0 {
		if rng.Intn(4) == 0 {
			return 0, int32(rng.Intn(5)), n
		}
		if rng.Intn(3) == 0 && pid == 3 {
			return 0, math.MaxInt32 - 1, n // only a follower may take it
		}
		return 0, 0, n
	}
	cur := mine[len(mine)-1]
	switch r := rng.Intn(10); {
	case r < 5:
		return cur.epoch, incrementSequence(cur.lastSeq, 1), n
	case r < 7:
		old := mine[len(mine)-1-rng.Intn(min(len(mine), 7))]
		return old.epoch, old.firstSeq, int(old.lastOffset-old.firstOffset) + 1
	case r < 8:
		return cur.epoch, incrementSequence(cur.lastSeq, int32(rng.Intn(3)+2)), n
	case r < 9:
		return cur.epoch + 1, int32(rng.Intn(2)), n
	default:
		return cur.epoch - 1, incrementSequence(cur.lastSeq, 1), n
	}
}

func checkModelProducers(t *testing.T, l *Log, m *producerModel) {
	t.Helper()
	last := map[int64]modelBatch{}
	for _, b := range m.batches {
		last[b.pid] = b
	}
	got := l.Producers()
	if len(got) != len(last) {
		t.Fatalf("producers %+v, model %+v", got, last)
	}
	for _, p := range got {
		b := last[p.ProducerID]
		if p.ProducerEpoch != b.epoch || p.LastSequence != b.lastSeq || p.LastOffset != b.lastOffset {
			t.Fatalf("producer %+v, model's last batch %+v", p, b)
		}
	}
}
