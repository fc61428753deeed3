package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
)

// TestCLIProduceInterrupt: a quire produce waiting for its next line ends
// on SIGINT (and SIGTERM) at once, not at the next line or the end of
// input: it says how many records it sent were acknowledged and exits
// 130, and the records are in the topic.
func TestCLIProduceInterrupt(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for i, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		topic := []string{"int", "term"}[i]
		cmd := quireProcess("--brokers", b.Addr(), "produce", topic, "-p", "0", "-v")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Standard input stays open: produce waits for a third line.
		if _, err := stdin.Write([]byte("a\nb\n")); err != nil {
			t.Fatal(err)
		}
		acked := make(chan int, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			n := 0
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "produced to ") {
					n++
					if n == 2 {
						acked <- n
					}
				}
			}
		}()
		select {
		case <-acked:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: two lines not acknowledged after 60s: %s", sig, stderr.String())
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var werr error
		select {
		case werr = <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: produce still running 30s after the signal", sig)
		}
		stdin.Close()
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != exitInterrupted {
			t.Fatalf("%v: exit %v, want status %d; stderr %s", sig, werr, exitInterrupted, stderr.String())
		}
		if !strings.Contains(stderr.String(), "interrupted: 2 records sent, all acknowledged") {
			t.Fatalf("%v: stderr %q", sig, stderr.String())
		}
		out, _, err := runCLIStdin("", "--brokers", b.Addr(), "consume", topic, "-p", "0", "-n", "2")
		if err != nil || out != "a\nb\n" {
			t.Fatalf("%v: consume after the interrupt: %q, %v", sig, out, err)
		}
	}
}
