package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Checkpoint file names, as Kafka names them.
const (
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	ReplicationCheckpointFile   = "replication-offset-checkpoint"
	LogStartCheckpointFile      = "log-start-offset-checkpoint"
	LeaderEpochCheckpointFile   = "leader-epoch-checkpoint"
	// CleanerCheckpointFile holds each compacted log's clean point (the
	// first offset its cleaner has not deduplicated), as Kafka's
	// cleaner-offset-checkpoint; a log missing from it is all dirty.
	CleanerCheckpointFile = "cleaner-offset-checkpoint"
	CleanShutdownFile     = ".quire_cleanshutdown"

	checkpointVersion = 0
)

// TopicPartition names a partition. It is the one key of a partition on
// the replication path too (the replicas hosted, the partitions of a fetch
// session), which imports storage in any case.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// writeFileAtomic writes data to path through a temporary file: write,
// fsync, rename over path, fsync the directory.
func writeFileAtomic(fsys FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// writeFileReplace writes data to path through a temporary file renamed
// over it, with no fsync: a process killed at any point leaves the old
// file or the new one whole, but a power loss may leave the old one (or,
// on a file system that does not order the data before the rename, an
// empty one, which reads as a damaged checkpoint). Only for a file whose
// loss the caller has provided for (see epochCache).
func writeFileReplace(fsys FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, path)
}

func readWholeFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n != len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// parseCheckpoint parses Kafka's checkpoint format: a version line (0), a
// count line, then count lines of fields fields each.
func parseCheckpoint(data []byte, fields int) ([][]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("%w: version %q", ErrBadCheckpoint, v)
	}
	c, ok := line()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("%w: count %q", ErrBadCheckpoint, c)
	}
	var out [][]string
	for i := 0; i < n; i++ {
		l, ok := line()
		f := strings.Fields(l)
		if !ok || len(f) != fields {
			return nil, fmt.Errorf("%w: line %d %q", ErrBadCheckpoint, i+3, l)
		}
		out = append(out, f)
	}
	for {
		l, ok := line()
		if !ok {
			break
		}
		if l != "" {
			return nil, fmt.Errorf("%w: trailing line %q", ErrBadCheckpoint, l)
		}
	}
	if err := sc.Err(); err != nil {
		// A line past bufio's limit ends the scan early: not a file we wrote.
		return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	return out, nil
}

// readOffsetCheckpoint reads a per-data-dir "<topic> <partition> <offset>"
// checkpoint. A missing file is an empty map.
func readOffsetCheckpoint(fsys FS, path string) (map[TopicPartition]int64, error) {
	data, err := readWholeFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := parseCheckpoint(data, 3)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := make(map[TopicPartition]int64, len(rows))
	for _, r := range rows {
		p, err1 := strconv.ParseInt(r[1], 10, 32)
		off, err2 := strconv.ParseInt(r[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: %w: %v", path, ErrBadCheckpoint, r)
		}
		m[TopicPartition{r[0], int32(p)}] = off
	}
	return m, nil
}

func writeOffsetCheckpoint(fsys FS, path string, m map[TopicPartition]int64) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(m))
	for _, tp := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return writeFileAtomic(fsys, path, b.Bytes())
}

func sortedKeys(m map[TopicPartition]int64) []TopicPartition {
	keys := make([]TopicPartition, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortTPs(keys)
	return keys
}
