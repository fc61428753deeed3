package storage

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// memFS is an in-memory FS for tests that need to be fast and
// deterministic (the fuzz targets): no temp directories, no syscalls, a
// fixed modification time. Removing a file leaves open handles working,
// as on POSIX. Safe for concurrent use.
type memFS struct {
	mu    sync.Mutex
	files map[string]*memData
	dirs  map[string]bool
}

type memData struct {
	mu   sync.RWMutex
	data []byte
}

func newMemFS() *memFS {
	return &memFS{files: map[string]*memData{}, dirs: map[string]bool{"/": true, ".": true}}
}

// memModTime is the modification time of every memFS file.
var memModTime = time.Unix(1700000000, 0)

func (m *memFS) open(name string, create, trunc bool) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[name]
	if !ok {
		if !create {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !m.dirs[filepath.Dir(name)] {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		d = &memData{}
		m.files[name] = d
	}
	if trunc {
		d.mu.Lock()
		d.data = d.data[:0]
		d.mu.Unlock()
	}
	return &memFile{d: d, name: filepath.Base(name)}, nil
}

func (m *memFS) Create(name string) (File, error)        { return m.open(name, true, true) }
func (m *memFS) OpenReadWrite(name string) (File, error) { return m.open(name, true, false) }
func (m *memFS) Open(name string) (File, error)          { return m.open(name, false, false) }

func (m *memFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] {
		for f := range m.files {
			if filepath.Dir(f) == name {
				return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrExist}
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) RemoveAll(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := name + string(filepath.Separator)
	for f := range m.files {
		if f == name || strings.HasPrefix(f, prefix) {
			delete(m.files, f)
		}
	}
	for d := range m.dirs {
		if d == name || strings.HasPrefix(d, prefix) {
			delete(m.dirs, d)
		}
	}
	return nil
}

func (m *memFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = d
	return nil
}

func (m *memFS) MkdirAll(dir string, _ os.FileMode) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; !m.dirs[d]; d = filepath.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

func (m *memFS) List(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for f := range m.files {
		if filepath.Dir(f) == dir {
			names = append(names, filepath.Base(f))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *memFS) Stat(name string) (os.FileInfo, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.files[name]; ok {
		d.mu.RLock()
		defer d.mu.RUnlock()
		return memInfo{name: filepath.Base(name), size: int64(len(d.data))}, nil
	}
	if m.dirs[name] {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) SyncDir(string) error { return nil }

// writeFile stores data as the whole content of name.
func (m *memFS) writeFile(name string, data []byte) {
	f, err := m.Create(name)
	if err != nil {
		panic(err)
	}
	_, _ = f.WriteAt(data, 0)
}

type memFile struct {
	d      *memData
	name   string
	closed bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.d.mu.RLock()
	defer f.d.mu.RUnlock()
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= int64(len(f.d.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if end := off + int64(len(p)); end > int64(len(f.d.data)) {
		f.d.data = growZero(f.d.data, int(end))
	}
	return copy(f.d.data[off:], p), nil
}

func growZero(b []byte, n int) []byte {
	if n <= cap(b) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

func (f *memFile) Truncate(size int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if size < 0 {
		return fs.ErrInvalid
	}
	if int(size) <= len(f.d.data) {
		f.d.data = f.d.data[:size]
	} else {
		f.d.data = growZero(f.d.data, int(size))
	}
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.d.mu.RLock()
	defer f.d.mu.RUnlock()
	return memInfo{name: f.name, size: int64(len(f.d.data))}, nil
}

func (f *memFile) Sync() error  { return nil }
func (f *memFile) Close() error { f.closed = true; return nil }

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return memModTime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
