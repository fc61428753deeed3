package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestDirLockExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire("data", dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}
	_, err = Acquire("data", dir)
	var inUse *InUseError
	if !errors.Is(err, ErrInUse) || !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Fatalf("second acquire: %v", err)
	}
	want := "data directory " + dir + " is in use by another quire process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire("data", dir)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if err := l2.Release(); err != nil {
		t.Fatal(err)
	}
}
