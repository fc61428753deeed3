package storage

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/quirelog/quire/internal/testdepth"
	"github.com/quirelog/quire/record"
)

// logModel is the naive model: the list of batches and the log start.
type logModel struct {
	batches [][]byte
	start   int64
}

func (m *logModel) leo() int64 {
	if len(m.batches) == 0 {
		return m.start
	}
	h, _ := record.ParseHeader(m.batches[len(m.batches)-1])
	return h.NextOffset()
}

func (m *logModel) visible() [][]byte {
	var out [][]byte
	for _, b := range m.batches {
		if h, _ := record.ParseHeader(b); h.LastOffset() >= m.start {
			out = append(out, b)
		}
	}
	return out
}

// TestLogRandomOpsAgainstModel runs random appends, reads, truncations,
// rolls, reopens and retention against the model.
func TestLogRandomOpsAgainstModel(t *testing.T) {
	t.Parallel()
	seeds := testdepth.Rounds(6, 2)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		cfg := smallConfig()
		cfg.SegmentBytes = int64(1024 + rng.Intn(4096))
		cfg.IndexIntervalBytes = int32(rng.Intn(512))
		l := openTest(t, dir, cfg, 0)
		m := &logModel{}
		epoch := int32(0)
		check := func(step int, what string) {
			t.Helper()
			if l.LogEndOffset() != m.leo() || l.LogStartOffset() != m.start {
				t.Fatalf("seed %d step %d (%s): leo %d start %d, model %d %d", seed, step, what,
					l.LogEndOffset(), l.LogStartOffset(), m.leo(), m.start)
			}
			got, want := readAll(t, l), m.visible()
			if len(got) != len(want) {
				t.Fatalf("seed %d step %d (%s): %d batches, model %d", seed, step, what, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("seed %d step %d (%s): batch %d differs", seed, step, what, i)
				}
			}
		}
		for step := 0; step < 300; step++ {
			switch op := rng.Intn(100); {
			case op < 55:
				var buf []byte
				nb := 1 + rng.Intn(3)
				for i := 0; i < nb; i++ {
					buf = append(buf, makeBatch(1+rng.Intn(5), rng.Intn(200), int64(step))...)
				}
				if rng.Intn(10) == 0 {
					epoch++
				}
				mustAppend(t, l, buf, epoch)
				forEachBatch(buf, func(b []byte) { m.batches = append(m.batches, append([]byte(nil), b...)) })
			case op < 70:
				if m.leo() == m.start {
					continue
				}
				off := m.start + rng.Int63n(m.leo()-m.start)
				res, err := l.Read(off, rng.Intn(2000), math.MaxInt64)
				if err != nil || len(res.Batches) == 0 {
					t.Fatalf("seed %d step %d: read %d: %v", seed, step, off, err)
				}
				h, _ := record.ParseHeader(res.Batches)
				if h.BaseOffset > off || h.LastOffset() < off {
					t.Fatalf("seed %d step %d: read %d got batch at %d", seed, step, off, h.BaseOffset)
				}
			case op < 77:
				if m.leo() == m.start {
					continue
				}
				off := m.start + rng.Int63n(m.leo()-m.start+1)
				if err := l.Truncate(off); err != nil {
					t.Fatal(err)
				}
				for len(m.batches) > 0 {
					h, _ := record.ParseHeader(m.batches[len(m.batches)-1])
					if h.LastOffset() < off {
						break
					}
					m.batches = m.batches[:len(m.batches)-1]
				}
				m.start = min(m.start, m.leo())
				check(step, "truncate")
			case op < 82:
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case op < 88:
				if m.leo() == m.start {
					continue
				}
				off := m.start + rng.Int63n(m.leo()-m.start+1)
				if err := l.DeleteRecordsBefore(off); err != nil {
					t.Fatal(err)
				}
				m.start = off
				check(step, "delete records")
			case op < 92:
				c := l.Config()
				c.RetentionBytes = int64(rng.Intn(8000))
				l.SetConfig(c)
				if _, err := l.ApplyRetention(); err != nil {
					t.Fatal(err)
				}
				m.start = l.LogStartOffset()
				c.RetentionBytes = -1
				l.SetConfig(c)
				check(step, "retention")
			default:
				clean := rng.Intn(2) == 0
				rp := l.RecoveryPoint()
				if clean {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					rp = math.MaxInt64
				} else {
					// Simulate a crash: drop the log without closing it.
					// Its background flushes end first, as a kill -9
					// ends them: one still running would write the old
					// log's leader epoch checkpoint over the new one's
					// (through the same temporary file).
					l.appendMu.Lock()
					l.flushWG.Wait()
					for _, s := range l.segs {
						_ = s.persistIndexes()
						_ = s.closeFiles()
					}
					l.appendMu.Unlock()
				}
				l = openTest(t, dir, cfg, rp)
				// The log start offset lives in the manager's checkpoint.
				l.maybeIncrementLogStart(m.start)
				if l.LogStartOffset() > m.start {
					m.start = l.LogStartOffset()
				}
				check(step, "reopen")
				if e, ok := l.LatestEpoch(); m.leo() > m.start && (!ok || e > epoch) {
					t.Fatalf("epoch %d %v after reopen, appended up to %d", e, ok, epoch)
				}
			}
		}
		check(-1, "end")
		l.Close()
	}
}
