package storage

// The clean marks on disk. A tombstone (and so a whole key) goes once it
// lies below a clean point reached more than delete.retention.ms ago
// (cleanState.marks); kept only in memory, the marks would restart from
// the next open's time, and tombstones stay longer than they should
// after every restart. Each log keeps them in its directory, in
// clean-marks-checkpoint, Kafka's checkpoint format with two fields a
// line:
//
//	0
//	<count>
//	<clean point> <Unix ms it was reached>
//	...
//
// written atomically (write, fsync, rename, fsync the directory) after
// each pass and after a truncation that lowered a mark, and read at open.
// A missing or unreadable file (one not ending with a newline, as a
// write cut short leaves it, included) gives no marks: the clean point read from
// cleaner-offset-checkpoint then counts from the open, as before, so
// tombstones are kept longer, never removed early. A file that was read
// also bounds the clean point: every move of it is followed by a write of
// the marks, and every truncation below a mark by one too, so a clean
// point above the newest mark is stale (a truncation the data directory's
// checkpoint did not see before a crash) and is lowered to it.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
)

// CleanMarksFile is a log's clean marks checkpoint.
const CleanMarksFile = "clean-marks-checkpoint"

// snapshotMarksLocked copies the marks for a write, with the sequence
// number that orders writes (appendMu held).
func (c *cleanState) snapshotMarksLocked() ([]cleanMark, int64) {
	c.marksSeq++
	return append([]cleanMark(nil), c.marks...), c.marksSeq
}

// writeMarks writes a snapshot of the marks unless a later one was
// written already.
func (l *Log) writeMarks(marks []cleanMark, seq int64) error {
	c := &l.cleaning
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	if seq <= c.marksWritten {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(marks))
	for _, m := range marks {
		fmt.Fprintf(&b, "%d %d\n", m.point, m.ms)
	}
	if err := writeFileAtomic(l.fs, join(l.dir, CleanMarksFile), b.Bytes()); err != nil {
		return fmt.Errorf("storage: write %s: %w", CleanMarksFile, err)
	}
	c.marksWritten = seq
	return nil
}

// readCleanMarks parses a log's clean marks file: increasing points,
// each at or above -1, times not going backwards.
func readCleanMarks(fsys FS, path string) ([]cleanMark, error) {
	data, err := readWholeFile(fsys, path)
	if err != nil {
		return nil, err
	}
	// A file cut short within its last line could still parse, with a
	// shorter (earlier) time: it must end with its newline.
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("%w: no final newline", ErrBadCheckpoint)
	}
	rows, err := parseCheckpoint(data, 2)
	if err != nil {
		return nil, err
	}
	marks := make([]cleanMark, 0, len(rows))
	for i, r := range rows {
		p, err1 := strconv.ParseInt(r[0], 10, 64)
		ms, err2 := strconv.ParseInt(r[1], 10, 64)
		if err1 != nil || err2 != nil || p < 0 ||
			(i > 0 && (p <= marks[i-1].point || ms < marks[i-1].ms)) {
			return nil, fmt.Errorf("%w: line %d %v", ErrBadCheckpoint, i+3, r)
		}
		marks = append(marks, cleanMark{p, ms})
	}
	return marks, nil
}

// loadCleanMarks reads the log's clean marks at open (after load: the
// log end is known), capped at the log end; a file holding marks above
// it (recovery cut the log) is rewritten before anything is appended.
func (l *Log) loadCleanMarks() error {
	marks, err := readCleanMarks(l.fs, join(l.dir, CleanMarksFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.logger.Warn("ignoring unreadable clean marks: tombstones are kept longer", "error", err)
		}
		return nil
	}
	l.cleaning.marks = marks
	l.cleaning.marksLoaded = true
	if l.cleaning.capMarksLocked(l.leo.Load()) {
		return l.writeMarks(l.cleaning.snapshotMarksLocked())
	}
	return nil
}
