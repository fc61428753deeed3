package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	count    int
	interval time.Duration
	pf       recordFormat
}

func consumeAsMember(ctx context.Context, cmd *cobra.Command, cl *client.Client, g *globalFlags, r memberRun) error {
	var reset client.Offset
	switch r.offset {
	case "start":
		reset = client.AtStart()
	case "end":
		reset = client.AtEnd()
	default:
		return fmt.Errorf("bad -o %q with --group and no -p: a member starts where the group committed, else at start or end", r.offset)
	}
	interval := r.interval
	if interval == 0 {
		interval = -1 // positions still commit on revoke and exit
	}
	errOut := cmd.ErrOrStderr()
	gc, err := cl.NewGroupConsumer(client.GroupConfig{Group: r.group, Topics: []string{r.topic}, Reset: reset,
		AutoCommitInterval: interval, InstanceID: r.instance,
		OnAssigned: func(ps []client.TopicPartition) { fmt.Fprintf(errOut, "group %s: assigned %v\n", r.group, ps) },
		OnRevoked:  func(ps []client.TopicPartition) { fmt.Fprintf(errOut, "group %s: revoked %v\n", r.group, ps) },
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
