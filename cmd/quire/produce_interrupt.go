package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/quirelog/quire/client"
)

// interruptFlushTimeout bounds how long an interrupted produce waits for
// the records it already sent; a second Ctrl-C stops the wait sooner.
const interruptFlushTimeout = 30 * time.Second

// lineReader hands the lines of an input to a channel, one at a time,
// read on a goroutine of its own. err is set before c is closed.
type lineReader struct {
	c   chan string
	err error
}

// readLines reads r's lines of at most maxLine bytes. The goroutine stays
// blocked on r if nobody reads the channel to the end: produce exits then.
func readLines(r io.Reader, maxLine int) *lineReader {
	lr := &lineReader{c: make(chan string)}
	go func() {
		sc := bufio.NewScanner(r)
		// The scanner holds a line and its newline in at most the larger
		// of its limit and the buffer's capacity, so the buffer starts no
		// larger than the limit.
		sc.Buffer(make([]byte, min(64<<10, maxLine+1)), maxLine+1)
		for sc.Scan() {
			lr.c <- sc.Text()
		}
		lr.err = sc.Err()
		close(lr.c)
	}()
	return lr
}

// interrupted ends a produce stopped by SIGINT or SIGTERM after sent
// records: it waits for their answers (for interruptFlushTimeout at most,
// or until a second signal), says on standard error how many were
// acknowledged, and exits 130, as shells expect of a process a Ctrl-C
// stopped, when every record sent was acknowledged; with some failed or
// unanswered it is an error (status 1) saying how many.
func (p *lineProducer) interrupted(cl *client.Client, sent int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, interruptFlushTimeout)
	defer cancel()
	flushErr := cl.Flush(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	unanswered := sent - p.ok - p.failed
	switch {
	case p.failed == 0 && unanswered == 0:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %d records sent, all acknowledged", sent)}
	case unanswered > 0:
		return fmt.Errorf("interrupted: of %d records sent, %d acknowledged, %d failed and %d unanswered (not known to be written): %v",
			sent, p.ok, p.failed, unanswered, flushErr)
	}
	if p.printed {
		return fmt.Errorf("interrupted: of %d records sent, %d acknowledged and %d failed (errors above)", sent, p.ok, p.failed)
	}
	return fmt.Errorf("interrupted: of %d records sent, %d acknowledged and %d failed: %v", sent, p.ok, p.failed, p.firstErr)
}
