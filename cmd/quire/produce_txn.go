package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/partitioner"
)

// txnLines is produce --transactional-id: every line of standard input in
// one transaction, committed at the end of input (or aborted with
// --abort, on an interrupt or on a failure), so a read_committed reader
// sees all of the lines or none; with --tx-records N, one transaction
// every N lines.
type txnLines struct {
	tx       *client.Transaction
	every    int  // lines a transaction; 0: all of them
	commit   bool // end each transaction with a commit (not --abort)
	errOut   io.Writer
	ended    int // transactions ended
	topic    string
	parts    int32
	sticky   int32 // the partition of keyless lines without -p
	pending  map[int32][]*client.Record
	sent     int // lines written in the open transaction
	lines    int // lines added to the open transaction
	out      io.Writer
	verbose  bool
	explicit bool
	fixed    int32
}

// txnChunk is how many lines go in one write.
const txnChunk = 500

// newTxnLines begins the first transaction of id; one ends every every
// lines (0: at the end of input alone), committed or aborted (commit
// false), each end said on errOut.
func newTxnLines(ctx context.Context, cl *client.Client, id, topic string, parts int32, explicit bool, fixed int32,
	out io.Writer, verbose bool, every int, commit bool, errOut io.Writer) (*txnLines, error) {
	tx, err := cl.NewTransaction(ctx, id, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("init transactional id %s: %w", id, err)
	}
	if err := tx.Begin(); err != nil {
		return nil, err
	}
	return &txnLines{tx: tx, every: every, commit: commit, errOut: errOut, topic: topic, parts: parts,
		sticky: rand.Int32N(max(parts, 1)), pending: map[int32][]*client.Record{},
		out: out, verbose: verbose, explicit: explicit, fixed: fixed}, nil
}

func (t *txnLines) add(ctx context.Context, r *client.Record) error {
	p := t.sticky
	switch {
	case t.explicit:
		p = t.fixed
	case r.Key != nil:
		p = partitioner.KeyPartition(r.Key, t.parts)
	}
	t.pending[p] = append(t.pending[p], r)
	t.lines++
	if len(t.pending[p]) >= txnChunk {
		if err := t.flush(ctx, p); err != nil {
			return err
		}
	}
	if t.every > 0 && t.lines >= t.every {
		// --tx-records: this transaction is full; the next begins.
		if err := t.endOne(ctx, t.commit, t.errOut); err != nil {
			return err
		}
		return t.tx.Begin()
	}
	return nil
}

func (t *txnLines) flush(ctx context.Context, p int32) error {
	recs := t.pending[p]
	if len(recs) == 0 {
		return nil
	}
	offs, err := t.tx.Produce(ctx, t.topic, p, recs...)
	if err != nil {
		return fmt.Errorf("produce to %s/%d: %w", t.topic, p, err)
	}
	t.sent += len(recs)
	if t.verbose {
		for _, o := range offs {
			fmt.Fprintf(t.out, "produced to %s/%d at offset %d (uncommitted)\n", t.topic, p, o)
		}
	}
	delete(t.pending, p)
	return nil
}

// end writes what is pending and commits (or aborts) the open
// transaction, saying which; with --tx-records, an open transaction with
// no line yet (the input ended on a transaction's last line) is left
// unsaid.
func (t *txnLines) end(ctx context.Context, commit bool, errOut io.Writer) error {
	if t.every > 0 && t.ended > 0 && t.lines == 0 {
		return t.tx.Abort(ctx) // nothing written in it: ends it on this side alone
	}
	return t.endOne(ctx, commit, errOut)
}

// endOne writes what is pending and commits (or aborts) the open
// transaction, saying which.
func (t *txnLines) endOne(ctx context.Context, commit bool, errOut io.Writer) error {
	for p := range t.pending {
		if err := t.flush(ctx, p); err != nil {
			return t.abort(ctx, err, errOut)
		}
	}
	n := t.sent
	t.sent, t.lines = 0, 0
	t.ended++
	which := ""
	if t.every > 0 {
		which = fmt.Sprintf(" (transaction %d)", t.ended)
	}
	if commit {
		if err := t.tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit%s: %w", which, err)
		}
		fmt.Fprintf(errOut, "committed %d records%s\n", n, which)
		return nil
	}
	if err := t.tx.Abort(ctx); err != nil {
		return fmt.Errorf("abort%s: %w", which, err)
	}
	fmt.Fprintf(errOut, "aborted the transaction of %d records%s (--abort)\n", n, which)
	return nil
}

// abort aborts after cause, returning cause.
func (t *txnLines) abort(ctx context.Context, cause error, errOut io.Writer) error {
	if err := t.tx.Abort(ctx); err != nil {
		return fmt.Errorf("%w; and the abort failed: %v", cause, err)
	}
	fmt.Fprintf(errOut, "aborted the transaction (%d records written in it)\n", t.sent)
	return cause
}
