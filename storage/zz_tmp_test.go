package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"bytes"

	"github.com/quirelog/quire/record"
)

func TestZZFuzzBodySpeed(t *testing.T) {
	data, _ := os.ReadFile("testdata/fuzz/FuzzRecoverSegment/seed-flipped")
	_ = data
	var seed []byte
	for i := 0; i < 3; i++ {
		b := makeBatch(2, 10, int64(i))
		record.SetBaseOffset(b, int64(2*i))
		seed = append(seed, b...)
	}
	start := time.Now()
	n := 0
	for time.Since(start) < 3*time.Second {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segmentName(0)+logSuffix), seed, 0o644)
		t0 := time.Now()
		l, err := OpenLog(dir, "f", 0, smallConfig(), 0, Options{FS: noSyncFS{}})
		if err != nil { t.Fatal(err) }
		t1 := time.Now()
		got := readAll(t, l)
		_ = bytes.Join(got, nil)
		l.AppendAsLeader(makeBatch(1, 1, 1), 0)
		t2 := time.Now()
		l.Close()
		if n < 3 { t.Logf("open %v read+append %v close %v", t1.Sub(t0), t2.Sub(t1), time.Since(t2)) }
		n++
	}
	t.Logf("%d execs in 3s", n)
}
