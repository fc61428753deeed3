package metadata

import (
	"context"
	"fmt"
	"sync"

	pb "github.com/quirelog/quire/api/metapb"
)

// Offset commits are written in batches (group commit): the commits that
// queue while one entry is being written go together in the next, as one
// CommitOffsetsBatch (metadata.version 3), so that many groups committing
// at once cost one raft entry per round rather than one each. A commit
// alone is written as a plain CommitOffsets, as before level 3.

// maxBatchOffsets caps the offsets of one batch entry; a batch always
// takes at least one commit (itself at most MaxOffsetCommitEntries).
const maxBatchOffsets = 2 * MaxOffsetCommitEntries

type pendingCommit struct {
	cmd  *pb.CommitOffsets
	done chan error
}

type commitBatcher struct {
	c        *Controller
	mu       sync.Mutex
	pending  []*pendingCommit
	flushing bool
	stats    commitBatchStats
}

type commitBatchStats struct {
	entries, commits uint64
}

// commit queues cmd for the next entry and waits for its outcome (or
// ctx's end: the commit may still be written then, as any timed-out
// commit may).
func (b *commitBatcher) commit(ctx context.Context, cmd *pb.CommitOffsets) error {
	p := &pendingCommit{cmd: cmd, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	if !b.flushing {
		b.flushing = true
		go b.flush(context.WithoutCancel(ctx))
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNoQuorum, ctx.Err())
	}
}

// flush writes what is queued, entry after entry, until nothing is.
func (b *commitBatcher) flush(ctx context.Context) {
	for {
		b.mu.Lock()
		n, offsets := 0, 0
		for n < len(b.pending) && (n == 0 || offsets+len(b.pending[n].cmd.Offsets) <= maxBatchOffsets) {
			offsets += len(b.pending[n].cmd.Offsets)
			n++
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		if n == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		b.stats.entries++
		b.stats.commits += uint64(n)
		b.mu.Unlock()
		b.write(ctx, batch)
	}
}

func (b *commitBatcher) write(ctx context.Context, batch []*pendingCommit) {
	ctx, cancel := context.WithTimeout(ctx, b.c.n.cfg.ApplyTimeout)
	defer cancel()
	if len(batch) == 1 || b.c.n.Image().metadataVersion() < MetadataVersionOffsetBatches {
		var wg sync.WaitGroup
		for _, p := range batch {
			wg.Go(func() {
				_, err := b.c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_CommitOffsets{CommitOffsets: p.cmd}})
				p.done <- err
			})
		}
		wg.Wait()
		return
	}
	cmd := &pb.CommitOffsetsBatch{Commits: make([]*pb.CommitOffsets, len(batch))}
	for i, p := range batch {
		cmd.Commits[i] = p.cmd
	}
	resp, err := b.c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_CommitOffsetsBatch{CommitOffsetsBatch: cmd}})
	results, ok := resp.(CommitBatchResult)
	if err == nil && (!ok || len(results) != len(batch)) {
		err = fmt.Errorf("metadata: a batch of %d commits answered %v", len(batch), resp)
	}
	for i, p := range batch {
		if err != nil {
			p.done <- err
		} else {
			p.done <- results[i]
		}
	}
}

// CommitBatchStats is how many commit entries the controller wrote and
// how many commits they carried (more commits than entries: batching).
func (c *Controller) CommitBatchStats() (entries, commits uint64) {
	c.commits.mu.Lock()
	defer c.commits.mu.Unlock()
	return c.commits.stats.entries, c.commits.stats.commits
}
