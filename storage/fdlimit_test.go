package storage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// fdLimitChildEnv names the data directory of the child process of
// TestManagerRestartsPastOpenFileLimit, which runs with a lowered open-file
// limit: the limit is the whole process's, so the parent, whose other
// tests run in parallel, keeps its own.
const fdLimitChildEnv = "QUIRE_STORAGE_FDLIMIT_DIR"

// The partitions' segment files outnumber the limit 14 times (200
// partitions of 3 segments, 9 files each, under 128): what is checked is
// that the manager never holds more than the limit, which a margin of 14
// shows as well as one of 21 did (600 under 256) at a third of the time.
const (
	childFileLimit  = 128
	childPartitions = 200
)

// TestManagerRestartsPastOpenFileLimit: a manager with more partitions
// than its process may open files (200 partitions of 3 segments, 1,800
// segment files, under a limit of 128) writes them all, closes, restarts
// cleanly and uncleanly, and serves every record of every partition, with
// reads and appends, never holding more descriptors than the limit.
func TestManagerRestartsPastOpenFileLimit(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv(fdLimitChildEnv); dir != "" {
		fdLimitChild(t, dir)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("needs RLIMIT_NOFILE and /proc/self/fd")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestManagerRestartsPastOpenFileLimit$", "-test.count=1",
		"-test.v", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), fdLimitChildEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestManagerRestartsPastOpenFileLimit")) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(line, []byte("fdlimit:")) {
			t.Log(string(bytes.TrimSpace(line)))
		}
	}
}

func fdLimitChild(t *testing.T, dir string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = childFileLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig()
	peak := 0
	checkFDs := func(when string) {
		n := openDescriptors()
		peak = max(peak, n)
		if n >= childFileLimit {
			t.Fatalf("%s: %d descriptors open, limit %d", when, n, childFileLimit)
		}
	}
	m, err := OpenManager(dir, cfg, Options{FS: noSyncFS{}})
	if err != nil {
		t.Fatal(err)
	}
	capacity := m.opts.Files.Capacity()
	if capacity > childFileLimit/2 {
		t.Fatalf("file cache capacity %d under a limit of %d", capacity, childFileLimit)
	}
	want := make([][][]byte, childPartitions) // batches per partition, as written
	for p := range want {
		l, err := m.GetOrCreate("t", int32(p), cfg)
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		for i := 0; l.NumSegments() < 3; i++ {
			b := makeBatch(4, 100+p%7, int64(1000*p+i))
			mustAppend(t, l, b, 1)
			want[p] = append(want[p], b)
		}
		if p%100 == 0 {
			checkFDs(fmt.Sprintf("writing partition %d", p))
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	verify := func(name string) {
		m, err := OpenManager(dir, cfg, Options{FS: noSyncFS{}})
		if err != nil {
			t.Fatalf("%s restart: %v", name, err)
		}
		checkFDs(name + " restart")
		logs := m.Logs()
		if len(logs) != childPartitions {
			t.Fatalf("%s restart: %d logs, want %d", name, len(logs), childPartitions)
		}
		for _, l := range logs {
			p := l.Partition()
			got := readAll(t, l)
			if len(got) != len(want[p]) {
				t.Fatalf("%s restart: partition %d has %d batches, want %d", name, p, len(got), len(want[p]))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[p][i]) {
					t.Fatalf("%s restart: partition %d batch %d differs", name, p, i)
				}
			}
			b := makeBatch(1, 10, int64(1000*p+99))
			mustAppend(t, l, b, 2)
			want[p] = append(want[p], b)
			if p%100 == 0 {
				checkFDs(fmt.Sprintf("%s restart, partition %d", name, p))
			}
		}
		st := m.opts.Files.Stats()
		t.Logf("fdlimit: %s restart of %d partitions (%d segment files) under RLIMIT_NOFILE %d: "+
			"file cache capacity %d, %d opens, %d evictions, at most %d descriptors open when sampled",
			name, childPartitions, 9*childPartitions, childFileLimit, st.Capacity, st.Opens, st.Evicted, peak)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	verify("clean")
	if err := os.Remove(join(dir, CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	verify("unclean")
}
