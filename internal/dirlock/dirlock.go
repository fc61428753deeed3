// Package dirlock keeps a directory to one process: an exclusive advisory
// lock (flock) on <dir>/.lock, which also records the holder's pid so that
// a second process can say who holds it. The lock is the operating
// system's: it goes with the process, so a crash leaves nothing to clean
// up (the file stays; an unlocked one is taken over).
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file's name in each locked directory.
const FileName = ".lock"

// ErrInUse: another process (or another open in this one) holds the
// directory's lock. Errors returned by Acquire for it are an *InUseError.
var ErrInUse = errors.New("dirlock: directory in use")

// InUseError names the directory and, when it could be read, the pid of
// the process holding it (0 when unknown).
type InUseError struct {
	Kind string // what the directory is, e.g. "data" or "metadata"
	Dir  string
	PID  int
}

func (e *InUseError) Error() string {
	holder := "another quire process"
	if e.PID > 0 {
		holder += fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s directory %s is in use by %s", e.Kind, e.Dir, holder)
}

// Is makes errors.Is(err, ErrInUse) hold.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// Lock is a held directory lock.
type Lock struct {
	dir  string
	file *os.File
}

// Acquire creates dir if needed and takes its lock without waiting; kind
// names the directory in the error when another process holds it.
func Acquire(kind, dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	if held {
		pid := readPID(f)
		f.Close()
		return nil, &InUseError{Kind: kind, Dir: dir, PID: pid}
	}
	if err := writePID(f); err != nil {
		_ = unlock(f)
		f.Close()
		return nil, fmt.Errorf("dirlock: write %s: %w", path, err)
	}
	return &Lock{dir: dir, file: f}, nil
}

// Dir is the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Release gives the lock up. The file stays: removing it would let a
// process that opened it just before take a lock on a file nobody else
// sees.
func (l *Lock) Release() error {
	if l == nil || l.file == nil {
		return nil
	}
	err := errors.Join(unlock(l.file), l.file.Close())
	l.file = nil
	if err != nil {
		return fmt.Errorf("dirlock: release %s: %w", l.dir, err)
	}
	return nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func readPID(f *os.File) int {
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
