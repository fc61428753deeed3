package storage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// File is the subset of *os.File the log uses.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
}

// FS is the filesystem seam, in the spirit of pebble's vfs.FS: tests wrap
// it to inject I/O errors and torn writes (see ErrorFS).
type FS interface {
	// Create creates or truncates a file for reading and writing.
	Create(name string) (File, error)
	// OpenReadWrite opens a file for reading and writing, creating it if
	// needed, without truncating it.
	OpenReadWrite(name string) (File, error)
	// Open opens a file read-only.
	Open(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the sorted names of the entries of dir.
	List(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs a directory, making renames and creations in it
	// durable.
	SyncDir(dir string) error
}

// OSFS is the operating system's filesystem.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (OSFS) OpenReadWrite(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}

func (OSFS) Open(name string) (File, error)              { return os.Open(name) }
func (OSFS) Remove(name string) error                    { return os.Remove(name) }
func (OSFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (OSFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (OSFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (OSFS) List(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

func (OSFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeIfExists removes name, ignoring a missing file.
func removeIfExists(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func fileSize(f File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func join(dir, name string) string { return filepath.Join(dir, name) }
