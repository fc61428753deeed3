package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/testparallel"
)

// runMainEnv makes the test binary run quire's main instead of the tests,
// so a test can start quire processes.
const runMainEnv = "QUIRE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	// Most tests start a broker or a cluster and wait on it.
	testparallel.Raise()
	os.Exit(m.Run())
}

func quireProcess(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// A second `quire server` on a data directory in use exits at once,
// naming the running process.
func TestServerSecondProcessOnDataDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"server", "--dev", "--data-dir", dir, "--set", "listeners=127.0.0.1:0", "--set", "metrics.listen=", "--set", "log.level=warn"}
	first := quireProcess(args...)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	t.Cleanup(func() {
		_ = first.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = first.Process.Kill()
			<-exited
		}
	})
	pid := strconv.Itoa(first.Process.Pid)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, ".lock"))
		if strings.TrimSpace(string(b)) == pid {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("first server exited: %v\n%s", err, firstErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("first server never locked %s\n%s", dir, firstErr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for the lock file
	}

	second := quireProcess(args...)
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	err := second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second server: %v\n%s", err, out.String())
	}
	want := fmt.Sprintf("data directory %s is in use by another quire process (pid %s)", dir, pid)
	if !strings.Contains(out.String(), want) {
		t.Fatalf("second server said:\n%s\nwant %q", out.String(), want)
	}
}
