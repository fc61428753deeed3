package storage

import (
	"errors"
	"os"
	"sync"
)

// Op names a filesystem operation for ErrorFS.
type Op int

// Operations ErrorFS can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpClose
)

// ErrInjected is the error ErrorFS returns unless its Injector supplies
// another.
var ErrInjected = errors.New("storage: injected i/o error")

// Injector decides whether an operation on path fails. It returns nil to
// let the operation through.
type Injector func(op Op, path string) error

// ErrorFS wraps an FS and fails the operations its Injector picks, like
// pebble's vfs/errorfs. With Torn set, a failed write first writes half of
// its buffer, as a crash in the middle of a write would.
type ErrorFS struct {
	Inner FS
	Torn  bool

	mu  sync.Mutex
	inj Injector
}

// NewErrorFS returns an ErrorFS over inner that injects nothing yet.
func NewErrorFS(inner FS) *ErrorFS { return &ErrorFS{Inner: inner} }

// SetInjector replaces the injector; nil injects nothing.
func (e *ErrorFS) SetInjector(inj Injector) {
	e.mu.Lock()
	e.inj = inj
	e.mu.Unlock()
}

func (e *ErrorFS) check(op Op, path string) error {
	e.mu.Lock()
	inj := e.inj
	e.mu.Unlock()
	if inj == nil {
		return nil
	}
	return inj(op, path)
}

func (e *ErrorFS) wrap(f File, err error, name string) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.Inner.Create(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.Inner.OpenReadWrite(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.Inner.Open(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.Inner.Remove(name)
}

func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.Inner.RemoveAll(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, newname); err != nil {
		return err
	}
	return e.Inner.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.Inner.MkdirAll(dir, perm)
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.Inner.List(dir)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.Inner.Stat(name)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.check(OpSync, dir); err != nil {
		return err
	}
	return e.Inner.SyncDir(dir)
}

type errorFile struct {
	File
	fs   *ErrorFS
	name string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		if f.fs.Torn && len(p) > 1 {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, err
		}
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errorFile) Close() error {
	err := f.File.Close()
	if ierr := f.fs.check(OpClose, f.name); ierr != nil && err == nil {
		err = ierr
	}
	return err
}
