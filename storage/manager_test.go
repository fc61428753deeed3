package storage

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/quirelog/quire/internal/clock"
)

func TestManagerCheckpointsAndCleanShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	m, err := OpenManager(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.GetOrCreate("orders", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.GetOrCreate("orders", 1, cfg)
	if again, _ := m.GetOrCreate("orders", 0, cfg); again != a {
		t.Fatal("GetOrCreate made a second log")
	}
	for i := 0; i < 30; i++ {
		mustAppend(t, a, makeBatch(2, 50, int64(i)), 1)
		mustAppend(t, b, makeBatch(1, 50, int64(i)), 2)
	}
	if err := a.DeleteRecordsBefore(20); err != nil {
		t.Fatal(err)
	}
	m.SetHighWatermark("orders", 0, 55)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatal("no clean shutdown marker")
	}
	cp, _ := os.ReadFile(filepath.Join(dir, ReplicationCheckpointFile))
	if string(cp) != "0\n1\norders 0 55\n" {
		t.Fatalf("replication checkpoint %q", cp)
	}
	rp, _ := os.ReadFile(filepath.Join(dir, RecoveryPointCheckpointFile))
	if !strings.Contains(string(rp), "orders 0 60\n") || !strings.Contains(string(rp), "orders 1 30\n") {
		t.Fatalf("recovery checkpoint %q", rp)
	}

	m, err = OpenManager(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("clean marker survives open")
	}
	a, ok := m.Get("orders", 0)
	if !ok || a.LogEndOffset() != 60 || a.LogStartOffset() != 20 {
		t.Fatalf("reopened log: %v leo %d start %d", ok, a.LogEndOffset(), a.LogStartOffset())
	}
	if hw, ok := m.HighWatermark("orders", 0); !ok || hw != 55 {
		t.Fatalf("hw %d %v", hw, ok)
	}
	if len(m.Logs()) != 2 || m.Logs()[1].Partition() != 1 {
		t.Fatal("logs")
	}
	if err := m.Delete("orders", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("deleted log dir remains")
	}
	// Crash: no Close. The next open recovers from the checkpoint.
	mustAppend(t, a, makeBatch(2, 50, 1), 1)
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Logs() {
		crashLog(l)
	}
	m, err = OpenManager(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ = m.Get("orders", 0)
	if a.LogEndOffset() != 62 || len(m.Logs()) != 1 {
		t.Fatalf("after crash leo %d logs %d", a.LogEndOffset(), len(m.Logs()))
	}
}

// flush.ms is the time elapsed since the last flush: a step of the wall
// clock neither brings the next flush forward nor holds it back (it was
// judged by the wall clock, and a clock stepped back an hour flushed
// nothing for an hour).
func TestManagerFlushMsAcrossClockSteps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step    time.Duration
		flushMs int64
	}{
		{2 * time.Hour, 60_000}, // forward: a minute has not passed
		{-2 * time.Hour, 100},   // backward: 100 ms pass all the same
	} {
		var clk clock.Jumped
		cfg := smallConfig()
		cfg.FlushMs = tc.flushMs
		m, err := OpenManager(t.TempDir(), cfg, Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := m.GetOrCreate("t", 0, cfg)
		mustAppend(t, l, makeBatch(2, 60, time.Now().UnixMilli()), 0)
		clk.Set(tc.step)
		if tc.step > 0 {
			if err := m.FlushDirty(); err != nil || l.RecoveryPoint() == l.LogEndOffset() {
				t.Errorf("step %v: flushed with flush.ms %d not elapsed (%v)", tc.step, tc.flushMs, err)
			}
		} else {
			deadline := time.Now().Add(10 * time.Second)
			for l.RecoveryPoint() != l.LogEndOffset() {
				if time.Now().After(deadline) {
					t.Errorf("step %v: not flushed 10s on with flush.ms %d", tc.step, tc.flushMs)
					break
				}
				if err := m.FlushDirty(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestManagerFlushDirtyAndRetention(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := smallConfig()
	cfg.FlushMs = 1000
	cfg.RetentionMs = 60_000
	m, err := OpenManager(t.TempDir(), cfg, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate("t", 0, cfg)
	for i := 0; i < 100; i++ {
		mustAppend(t, l, makeBatch(2, 60, 1_000_000), 0)
	}
	if err := m.FlushDirty(); err != nil || l.RecoveryPoint() == l.LogEndOffset() {
		t.Fatalf("flushed too early: rp %d %v", l.RecoveryPoint(), err)
	}
	clock.t = clock.t.Add(2 * time.Second)
	if err := m.FlushDirty(); err != nil || l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("not flushed: rp %d leo %d %v", l.RecoveryPoint(), l.LogEndOffset(), err)
	}
	clock.t = clock.t.Add(2 * time.Minute)
	// Without a known high watermark retention deletes nothing.
	segs := l.NumSegments()
	if err := m.RunRetention(); err != nil || l.NumSegments() != segs || segs < 3 {
		t.Fatalf("retention without hw: %d of %d segments %v", l.NumSegments(), segs, err)
	}
	// With one, it stops at the segment holding it.
	hw := l.LogEndOffset() / 2
	m.SetHighWatermark("t", 0, hw)
	if err := m.RunRetention(); err != nil || l.LogStartOffset() > hw || l.NumSegments() == segs {
		t.Fatalf("retention below hw %d: start %d, %d segments %v", hw, l.LogStartOffset(), l.NumSegments(), err)
	}
	if res, err := l.Read(hw, 1, math.MaxInt64); err != nil || len(res.Batches) == 0 {
		t.Fatalf("offset %d at the high watermark deleted: %v", hw, err)
	}
	m.SetHighWatermark("t", 0, l.LogEndOffset())
	if err := m.RunRetention(); err != nil || l.NumSegments() != 1 {
		t.Fatalf("retention: %d segments %v", l.NumSegments(), err)
	}
}

// TestRetentionNeverPassesHighWatermark: neither retention.ms nor
// retention.bytes deletes a segment holding offsets at or above the high
// watermark passed to ApplyRetentionBelow.
func TestRetentionNeverPassesHighWatermark(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	for _, byBytes := range []bool{false, true} {
		cfg := smallConfig()
		if byBytes {
			cfg.RetentionBytes = 0
		} else {
			cfg.RetentionMs = 1000
		}
		l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			mustAppend(t, l, makeBatch(2, 60, 1), 0)
		}
		if l.NumSegments() < 4 {
			t.Fatalf("%d segments", l.NumSegments())
		}
		for _, hw := range []int64{0, 1, 31, 64, 65, 90, 119, 150, 199, 200} {
			if _, err := l.ApplyRetentionBelow(hw); err != nil {
				t.Fatal(err)
			}
			if l.LogStartOffset() > hw {
				t.Fatalf("bytes %v: log start %d passed high watermark %d", byBytes, l.LogStartOffset(), hw)
			}
			if res, err := l.Read(hw, 1, math.MaxInt64); hw < l.LogEndOffset() && (err != nil || len(res.Batches) == 0) {
				t.Fatalf("bytes %v: offset %d at the high watermark gone: %v", byBytes, hw, err)
			}
		}
		if l.NumSegments() != 1 {
			t.Fatalf("bytes %v: %d segments left with hw at the log end", byBytes, l.NumSegments())
		}
		l.Close()
	}
}

func TestManagerCorruptCheckpointRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	m, _ := OpenManager(dir, cfg, Options{})
	l, _ := m.GetOrCreate("x", 3, cfg)
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, RecoveryPointCheckpointFile), []byte("7\ngarbage"), 0o644)
	m, err := OpenManager(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if l, ok := m.Get("x", 3); !ok || l.LogEndOffset() != 3 {
		t.Fatal("log lost")
	}
	if _, err := m.GetOrCreate("../evil", 0, cfg); err == nil {
		t.Fatal("path in topic accepted")
	}
}

// TestManagerIOErrorOnCheckpoint: a data directory whose checkpoints cannot
// be written is offline: every log in it fails (refuses appends, tells
// its OnFailure hook), Close says so and leaves no clean-shutdown marker,
// and the next open recovers the logs with every record.
func TestManagerIOErrorOnCheckpoint(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(OSFS{})
	cfg := smallConfig()
	dir := t.TempDir()
	m, err := OpenManager(dir, cfg, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.GetOrCreate("t", 0, cfg)
	mustAppend(t, l, makeBatch(1, 1, 1), 0)
	told := make(chan error, 1)
	l.OnFailure(func(err error) { told <- err })
	efs.SetInjector(func(op Op, path string) error {
		if op == OpRename {
			return ErrInjected
		}
		return nil
	})
	if err := m.Checkpoint(); !errors.Is(err, ErrInjected) {
		t.Fatalf("checkpoint: %v", err)
	}
	select {
	case err := <-told:
		if !errors.Is(err, ErrLogFailed) || !errors.Is(err, ErrInjected) {
			t.Fatalf("failure told: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the log's failure hook was never told")
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after the checkpoint failed: %v", err)
	}
	efs.SetInjector(nil)
	if err := m.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("close after the directory failed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean shutdown marker after a failure: %v", err)
	}
	m2, err := OpenManager(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if l2, ok := m2.Get("t", 0); !ok || l2.LogEndOffset() != 1 {
		t.Fatal("the record before the failure is lost")
	}
}

// TestManagerFirstStartLog: a brand-new data directory says it is being
// created, not recovered; a crashed one says it is recovering.
func TestManagerFirstStartLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var buf bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	cfg := smallConfig()
	m, err := OpenManager(dir, cfg, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "creating a new data directory") || strings.Contains(buf.String(), "recovering") {
		t.Fatalf("first start logged:\n%s", buf.String())
	}
	l, err := m.GetOrCreate("orders", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(2, 50, 1), 1)
	m.closeLogs() // no clean shutdown marker: a crash
	buf.Reset()
	m, err = OpenManager(dir, cfg, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(buf.String(), "no clean shutdown marker, recovering logs") || strings.Contains(buf.String(), "creating") {
		t.Fatalf("restart after a crash logged:\n%s", buf.String())
	}
}

// TestManagerHighWatermarkTakesNoManagerLock: a log's HW is set and read
// while the manager's mutex (one for the whole data directory) is held,
// as it is for as long as the checkpoint writer writes and syncs its
// files; the next checkpoint records it.
func TestManagerHighWatermarkTakesNoManagerLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := OpenManager(dir, smallConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs []*Log
	for p := range int32(3) {
		l, err := m.GetOrCreate("t", p, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			mustAppend(t, l, makeBatch(1, 50, int64(i)), 1)
		}
		logs = append(logs, l)
	}

	m.mu.Lock()
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for i, l := range logs {
			l.SetHighWatermark(int64(5 + i))
			if hw, ok := l.HighWatermark(); !ok || hw != int64(5+i) {
				t.Errorf("partition %d: hw %d %v after setting %d", i, hw, ok, 5+i)
			}
		}
	}()
	select {
	case <-moved:
	case <-time.After(time.Minute):
		m.mu.Unlock()
		<-moved
		t.Fatal("setting a log's HW waited for the manager's mutex")
	}
	m.mu.Unlock()

	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, err := readOffsetCheckpoint(m.opts.FS, filepath.Join(dir, ReplicationCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		if hw := got[TopicPartition{"t", int32(i)}]; hw != int64(5+i) {
			t.Errorf("partition %d: checkpointed hw %d, want %d", i, hw, 5+i)
		}
	}
}

// TestLogBackgroundFlushFailureTold: the background fsync of a rolled
// segment failing tells the log's failure hook at once, before anything
// else is appended or flushed, and the log refuses the next append.
func TestLogBackgroundFlushFailureTold(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(OSFS{})
	cfg := smallConfig()
	m, err := OpenManager(t.TempDir(), cfg, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	l, _ := m.GetOrCreate("t", 0, cfg)
	told := make(chan error, 1)
	l.OnFailure(func(err error) { told <- err })
	efs.SetInjector(func(op Op, path string) error {
		if op == OpSync && strings.HasSuffix(path, ".log") {
			return ErrInjected
		}
		return nil
	})
	// Appends past SegmentBytes roll the segment, whose fsync goes to the
	// background.
	for i := 0; l.NumSegments() < 2; i++ {
		if i > 100 {
			t.Fatal("the log never rolled")
		}
		mustAppend(t, l, makeBatch(4, 200, 1), 0)
	}
	select {
	case err := <-told:
		if !errors.Is(err, ErrLogFailed) || !errors.Is(err, ErrInjected) {
			t.Fatalf("failure told: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a failed background fsync was never told")
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after a failed background fsync: %v", err)
	}
}
