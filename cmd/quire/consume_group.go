package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

// memberRun is consume --group without -p: a consumer group member.
type memberRun struct {
	topic    string
	group    string
	instance string // "" a dynamic member
	offset   string
	fallback client.Offset // where a partition without a commit starts (groupFallback)
	why      string        // what fallback is, for the messages
	count    int
	interval time.Duration
	pf       recordFormat
}

// sayMemberStarts says where the partitions ps just assigned start: at
// the group's committed offsets, else at r.fallback, as the member's
// consumer finds them too (an end looked up here may be passed by
// records produced meanwhile). A lookup that fails is said, not fatal:
// the consumer finds its starts by itself.
func sayMemberStarts(ctx context.Context, cl *client.Client, w io.Writer, r memberRun, ps []client.TopicPartition) {
	var parts []int32
	for _, tp := range ps {
		if tp.Topic == r.topic {
			parts = append(parts, tp.Partition)
		}
	}
	slices.Sort(parts)
	// Bounded, so that the run's exit does not wait long on a lookup.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	at, committed, none, err := groupStarts(lctx, cl, r.group, r.topic, parts, r.fallback)
	if err != nil {
		if ctx.Err() == nil { // not interrupted
			fmt.Fprintf(w, "group %s: cannot tell where %s starts: %v\n", r.group, r.topic, err)
		}
		return
	}
	sayGroupStarts(w, r.group, r.topic, parts, at, committed, r.why)
	if len(none) > 0 {
		fmt.Fprintf(w, "group %s: %v\n", r.group, errNoCommit(r.group, r.topic, none))
	}
}

// lockedWriter serializes the writes of several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func consumeAsMember(ctx context.Context, cmd *cobra.Command, cl *client.Client, g *globalFlags, r memberRun) error {
	switch r.fallback {
	case client.AtStart(), client.AtEnd(), client.NoReset():
	default:
		return fmt.Errorf("bad -o %q with --group and no -p: a member starts where the group committed, else at start or end", r.offset)
	}
	interval := r.interval
	if interval == 0 {
		interval = -1 // positions still commit on revoke and exit
	}
	errOut := &lockedWriter{w: cmd.ErrOrStderr()}
	// Where assigned partitions start is looked up beside the member's
	// heartbeat loop (which runs OnAssigned), not in it.
	var said sync.WaitGroup
	defer said.Wait()
	gc, err := cl.NewGroupConsumer(client.GroupConfig{Group: r.group, Topics: []string{r.topic}, Reset: r.fallback,
		AutoCommitInterval: interval, InstanceID: r.instance,
		OnAssigned: func(ps []client.TopicPartition) {
			fmt.Fprintf(errOut, "group %s: assigned %v\n", r.group, ps)
			said.Go(func() { sayMemberStarts(ctx, cl, errOut, r, ps) })
		},
		OnRevoked: func(ps []client.TopicPartition) { fmt.Fprintf(errOut, "group %s: revoked %v\n", r.group, ps) },
	})
	if err != nil {
		return err
	}
	leave := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return gc.Close(cctx)
	}
	w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	seen := 0
	for r.count <= 0 || seen < r.count {
		recs, err := gc.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				break // interrupted
			}
			return errors.Join(err, leave())
		}
		unprinted := map[client.TopicPartition]bool{}
		for _, rec := range recs {
			if r.count > 0 && seen >= r.count {
				// Not printed: the group's position stays before it.
				tp := client.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
				if !unprinted[tp] {
					unprinted[tp] = true
					if err := gc.Seek(rec.Topic, rec.Partition, rec.Offset); err != nil {
						return errors.Join(err, leave())
					}
				}
				continue
			}
			seen++
			if g.format == "json" {
				writeJSONRecord(w, rec)
			} else {
				r.pf.write(w, rec)
			}
		}
		if err := w.Flush(); err != nil {
			// What was not written out must not be committed: leave
			// without committing (the last commit stands).
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return errors.Join(err, gc.Leave(cctx))
		}
	}
	return leave()
}
