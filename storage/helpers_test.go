package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// makeBatch builds a batch of n records with values of size bytes; the
// records carry their ordinal in the key so reads can be checked.
func makeBatch(n, size int, ts int64) []byte {
	b := record.NewBuilder(record.None)
	v := bytes.Repeat([]byte{'v'}, size)
	for i := 0; i < n; i++ {
		b.Append(ts, []byte(fmt.Sprintf("k%d", i)), v, nil)
	}
	return b.Build()
}

func smallConfig() LogConfig {
	c := DefaultLogConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	c.SegmentIndexBytes = 1024
	c.RetentionMs = -1
	return c
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func openTest(t testing.TB, dir string, cfg LogConfig, rp int64) *Log {
	t.Helper()
	l, err := OpenLog(dir, "t", 0, cfg, rp, Options{FS: noSyncFS{}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

// readAll reads every batch from the log start to the end, checking CRCs
// and contiguity, and returns the batches.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<16, math.MaxInt64)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Batches) == 0 {
			t.Fatalf("empty read at %d below LEO %d", off, l.LogEndOffset())
		}
		err = record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
			if h.BaseOffset > off || h.LastOffset() < off {
				return fmt.Errorf("batch [%d, %d] does not hold %d", h.BaseOffset, h.LastOffset(), off)
			}
			off = h.NextOffset()
			out = append(out, append([]byte(nil), b...))
			return nil
		})
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if res.HighOffset != off {
			t.Fatalf("high offset %d, want %d", res.HighOffset, off)
		}
	}
	return out
}

func mustAppend(t testing.TB, l *Log, batch []byte, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(batch, epoch)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// noSyncFS skips fsync: the tests simulate crashes by damaging files, not
// by losing power, and fsync would only make them slow.
type noSyncFS struct{ OSFS }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }

// SyscallConn lets the log reserve space in the file (LogConfig.Preallocate)
// as it would in an *os.File.
func (f noSyncFile) SyscallConn() (syscall.RawConn, error) {
	return f.File.(syscall.Conn).SyscallConn()
}

func (f noSyncFS) Create(name string) (File, error) {
	file, err := f.OSFS.Create(name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

func (f noSyncFS) OpenReadWrite(name string) (File, error) {
	file, err := f.OSFS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }
