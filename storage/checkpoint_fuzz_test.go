package storage

import (
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"testing"
)

// The checkpoint and meta.properties parsers read files that a crash, a
// full disk or an operator may have left in any state: they never panic,
// and whatever they accept is written back (by the writer that made it)
// as a file that reads back the same.

func writeMem(t *testing.T, fsys *memFS, path string, data []byte) {
	t.Helper()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(fsys, path, data); err != nil {
		t.Fatal(err)
	}
}

func FuzzOffsetCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\nt 0 10\nother 7 -1\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\nt 0 10\n\njunk\n"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("0\n2\nt 0 1\nt 0 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := newMemFS()
		writeMem(t, fsys, "/d/cp", data)
		m, err := readOffsetCheckpoint(fsys, "/d/cp")
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("%q: %v, not ErrBadCheckpoint", data, err)
			}
			return
		}
		if err := writeOffsetCheckpoint(fsys, "/d/cp2", m); err != nil {
			t.Fatal(err)
		}
		back, err := readOffsetCheckpoint(fsys, "/d/cp2")
		if err != nil {
			t.Fatalf("%q parsed as %v, written back unreadable: %v", data, m, err)
		}
		if !maps.Equal(m, back) {
			t.Fatalf("%q parsed as %v, written back and read as %v", data, m, back)
		}
	})
}

func FuzzLeaderEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n3 100\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\n3 100\n2 200\n"))
	f.Add([]byte("0\n1\n-1 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := newMemFS()
		writeMem(t, fsys, "/d/"+LeaderEpochCheckpointFile, data)
		c, err := loadEpochCache(fsys, "/d/"+LeaderEpochCheckpointFile)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("%q: %v, not ErrBadCheckpoint", data, err)
			}
			return
		}
		c.path = "/d/again"
		if err := c.persistLocked(true); err != nil {
			t.Fatal(err)
		}
		back, err := loadEpochCache(fsys, "/d/again")
		if err != nil {
			t.Fatalf("%q parsed as %v, written back unreadable: %v", data, c.entries, err)
		}
		if !slices.Equal(c.entries, back.entries) {
			t.Fatalf("%q parsed as %v, written back and read as %v", data, c.entries, back.entries)
		}
	})
}

func FuzzMetaProperties(f *testing.F) {
	f.Add([]byte("#\n# comment\nversion=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"))
	f.Add([]byte("version=1\n"))
	f.Add([]byte("version = 1 \r\n!x\n=\na=b=c\n"))
	f.Add([]byte("no equals\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		props, err := parseProperties(data)
		if err == nil {
			back, err := parseProperties(formatProperties(props))
			if err != nil {
				t.Fatalf("%q parsed as %v, written back unreadable: %v", data, props, err)
			}
			if !maps.Equal(props, back) {
				t.Fatalf("%q parsed as %v, written back and read as %v", data, props, back)
			}
		}
		// The whole load: an id it returns is one it could have made.
		fsys := newMemFS()
		writeMem(t, fsys, "/d/"+MetaPropertiesFile, data)
		id, created, err := loadOrCreateDirectoryID(fsys, "/d")
		if err != nil {
			if !errors.Is(err, ErrBadMetaProperties) {
				t.Fatalf("%q: %v, not ErrBadMetaProperties", data, err)
			}
			return
		}
		if created {
			t.Fatalf("%q: a new id over an existing file", data)
		}
		if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("%q: id %q", data, id)
		}
	})
}

// TestCheckpointRefusesTrailingJunk: after the counted lines only blank
// lines may follow, however far down the junk is, and a line too long to
// scan is refused rather than read as the end of the file.
func TestCheckpointRefusesTrailingJunk(t *testing.T) {
	t.Parallel()
	long := make([]byte, 70<<10)
	for i := range long {
		long[i] = 'x'
	}
	for _, data := range []string{
		"0\n1\nt 0 10\nu 1 2\n",
		"0\n1\nt 0 10\n\njunk\n",
		"0\n1\nt 0 10\n\n\n\nu 1 2\n",
		"0\n0\n" + string(long) + "\n",
	} {
		if rows, err := parseCheckpoint([]byte(data), 3); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%.40q: %v, %v; want ErrBadCheckpoint", data, rows, err)
		}
	}
	rows, err := parseCheckpoint([]byte("0\n1\nt 0 10\n\n\n"), 3)
	if err != nil || len(rows) != 1 {
		t.Fatalf("trailing blank lines: %v, %v", rows, err)
	}
}
