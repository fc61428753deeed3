package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManagerDirectoryID: a new data dir gets a random directory.id in a
// Kafka-style meta.properties; it survives reopening; a wiped dir gets
// another; an unreadable file refuses to open.
func TestManagerDirectoryID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	open := func() *Manager {
		t.Helper()
		m, err := OpenManager(dir, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	id := m.DirectoryID()
	if len(id) != 22 {
		t.Fatalf("directory id %q, want 22 base64url characters", id)
	}
	if _, err := m.GetOrCreate("orders", 0, cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, MetaPropertiesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "version=1\n") || !strings.Contains(string(data), "directory.id="+id+"\n") {
		t.Fatalf("meta.properties:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaPropertiesFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}

	m = open()
	if m.DirectoryID() != id {
		t.Fatalf("reopened: directory id %q, want %q", m.DirectoryID(), id)
	}
	if _, ok := m.Get("orders", 0); !ok {
		t.Fatal("meta.properties taken for a log, or the log lost")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Wiped: a new id.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	m = open()
	if m.DirectoryID() == id || len(m.DirectoryID()) != 22 {
		t.Fatalf("wiped dir: directory id %q, old %q", m.DirectoryID(), id)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{"version=1\ndirectory.id=short\n", "version=2\ndirectory.id=" + id + "\n", "garbage\n", "version=1\n"} {
		if err := os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if m, err := OpenManager(dir, cfg, Options{}); !errors.Is(err, ErrBadMetaProperties) {
			if m != nil {
				m.Close()
			}
			t.Fatalf("meta.properties %q: got %v, want ErrBadMetaProperties", bad, err)
		}
	}
}

func TestParseProperties(t *testing.T) {
	t.Parallel()
	props, err := parseProperties([]byte("#c\n! also\n\n version = 1 \ndirectory.id=a=b\n"))
	if err != nil || props["version"] != "1" || props["directory.id"] != "a=b" || len(props) != 2 {
		t.Fatalf("parsed %v, %v", props, err)
	}
	back, err := parseProperties(formatProperties(props))
	if err != nil || len(back) != 2 || back["directory.id"] != "a=b" {
		t.Fatalf("round trip %v, %v", back, err)
	}
}
