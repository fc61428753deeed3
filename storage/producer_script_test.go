package storage

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Producer state scripts (testdata/producer/*.txt), read like the rules
// they check, in the style of cockroachdb/datadriven: each case is a
// command line, a "----" line and the expected output up to the next blank
// line; lines starting with # between cases are comments. -rewrite-producer
// writes the files back with the output the code gives.
//
// Commands (arguments key=value):
//
//	append pid= epoch= seq= n= [ts=]   leader append of n records
//	follower pid= epoch= seq= n= [ts=] follower append at the log end
//	plain n=                           leader append without a producer id
//	truncate to=                       Log.Truncate
//	truncate-fully to=                 Log.TruncateFullyAndStartAt
//	roll                               Log.Roll
//	restart                            close and reopen
//	corrupt-snapshots                  flip a byte of every snapshot file
//	clock ms=                          set the log's clock
//	expire                             Log.ExpireProducers
//	producers                          Log.Producers
//	snapshots                          the snapshot files' offsets
//
// ts defaults to the clock; the config is expiry after 1 day.

var rewriteProducer = flag.Bool("rewrite-producer", false, "rewrite the expected output of testdata/producer scripts")

type producerScript struct {
	t   *testing.T
	dir string
	clk *fakeClock
	cfg LogConfig
	l   *Log
}

func (s *producerScript) open() {
	l, err := OpenLog(s.dir, "t", 0, s.cfg, math.MaxInt64, Options{FS: noSyncFS{}, Now: s.clk.Now})
	if err != nil {
		s.t.Fatal(err)
	}
	s.l = l
}

func scriptInt(t *testing.T, pos string, args map[string]string, key string, def int64) int64 {
	v, ok := args[key]
	if !ok {
		if def == math.MinInt64 {
			t.Fatalf("%s: missing %s=", pos, key)
		}
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%s: %v", pos, key, v, err)
	}
	return n
}

func describeAppend(info AppendInfo, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case info.Duplicate:
		return fmt.Sprintf("duplicate of offsets %d-%d", info.FirstOffset, info.LastOffset)
	default:
		return fmt.Sprintf("appended at offsets %d-%d", info.FirstOffset, info.LastOffset)
	}
}

func (s *producerScript) run(pos, cmd string, args map[string]string) string {
	t := s.t
	req := int64(math.MinInt64)
	batch := func() []byte {
		ts := scriptInt(t, pos, args, "ts", s.clk.t.UnixMilli())
		return producerBatch(scriptInt(t, pos, args, "pid", req), int16(scriptInt(t, pos, args, "epoch", req)),
			int32(scriptInt(t, pos, args, "seq", req)), int(scriptInt(t, pos, args, "n", 1)), ts)
	}
	switch cmd {
	case "append":
		return describeAppend(s.l.AppendAsLeader(batch(), 0))
	case "follower":
		b := batch()
		return describeAppend(appendFollower(t, s.l, b), nil)
	case "plain":
		return describeAppend(s.l.AppendAsLeader(makeBatch(int(scriptInt(t, pos, args, "n", 1)), 5, s.clk.t.UnixMilli()), 0))
	case "truncate":
		if err := s.l.Truncate(scriptInt(t, pos, args, "to", req)); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("log end %d", s.l.LogEndOffset())
	case "truncate-fully":
		if err := s.l.TruncateFullyAndStartAt(scriptInt(t, pos, args, "to", req)); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("log end %d", s.l.LogEndOffset())
	case "roll":
		if err := s.l.Roll(); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("%d segments", s.l.NumSegments())
	case "restart":
		if err := s.l.Close(); err != nil {
			return "error: " + err.Error()
		}
		s.open()
		return ""
	case "corrupt-snapshots":
		for _, n := range snapshotFiles(t, s.dir) {
			path := filepath.Join(s.dir, n)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 0x40
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ""
	case "clock":
		s.clk.t = time.UnixMilli(scriptInt(t, pos, args, "ms", req))
		return ""
	case "expire":
		return fmt.Sprintf("expired %d", s.l.ExpireProducers())
	case "producers":
		var out []string
		for _, p := range s.l.Producers() {
			out = append(out, fmt.Sprintf("producer %d epoch %d last-seq %d last-ts %d last-offset %d",
				p.ProducerID, p.ProducerEpoch, p.LastSequence, p.LastTimestamp, p.LastOffset))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "snapshots":
		var out []string
		for _, n := range snapshotFiles(t, s.dir) {
			off, _ := parseSegmentName(n, snapshotSuffix)
			out = append(out, strconv.FormatInt(off, 10))
		}
		return strings.Join(out, " ")
	}
	t.Fatalf("%s: unknown command %q", pos, cmd)
	return ""
}

// TestProducerScripts runs testdata/producer/*.txt.
func TestProducerScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/producer/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &producerScript{t: t, dir: t.TempDir(), clk: &fakeClock{t: time.UnixMilli(1_000_000)}, cfg: smallConfig()}
			s.open()
			defer func() { s.l.Close() }()
			runProducerScript(t, path, s)
		})
	}
}

func runProducerScript(t *testing.T, path string, s *producerScript) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			out = append(out, lines[i])
			continue
		}
		pos := fmt.Sprintf("%s:%d", filepath.Base(path), i+1)
		fields := strings.Fields(line)
		args := map[string]string{}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			args[k] = v
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s: command without a ---- line after it", pos)
		}
		out = append(out, lines[i], lines[i+1])
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got := strings.TrimRight(s.run(pos, fields[0], args), "\n")
		if got != "" {
			out = append(out, strings.Split(got, "\n")...)
		}
		if i < len(lines) {
			out = append(out, "")
		}
		if !*rewriteProducer && got != strings.Join(want, "\n") {
			t.Fatalf("%s: %s\ngot:\n%s\nwant:\n%s", pos, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewriteProducer {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
