package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

// consume --share: a share group member that prints each record, then
// accepts it.

// shareRun is what consume --share was asked.
type shareRun struct {
	topic, group string
	keyOrdered   bool
	count        int
	pf           recordFormat
}

// shareCloseTimeout bounds the last acknowledgements and the leave.
const shareCloseTimeout = 10 * time.Second

// checkShareFlags refuses the flags that make no sense for a share group
// member.
func checkShareFlags(cmd *cobra.Command, group string) error {
	if group == "" {
		return fmt.Errorf("--key-ordered is a share group's option: it needs --share GROUP")
	}
	for _, name := range []string{"partitions", "offset", "reset", "group", "instance-id", "isolation", "commit-interval"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not go with --share: a share group member reads every partition from where the group is, and acknowledges each record", name)
		}
	}
	return nil
}

func consumeShared(cmd *cobra.Command, g *globalFlags, run shareRun) error {
	ctx, cancel := cmdContext()
	defer cancel()
	cl, err := newClient(ctx, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := openTopic(ctx, cl, run.topic, cmd.ErrOrStderr()); err != nil {
		return err
	}
	var opts []client.ShareOpt
	if run.keyOrdered {
		opts = append(opts, client.ShareKeyOrdered())
	}
	sc, err := cl.NewShareConsumer(ctx, run.group, []string{run.topic}, opts...)
	if err != nil {
		return fmt.Errorf("share group %s: %w", run.group, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "share group %s: member %s reading %s\n", run.group, sc.MemberID(), run.topic)
	w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	err = printShared(ctx, sc, w, g.format == "json", run)
	// What was accepted is sent, the rest released, whatever stopped us.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), shareCloseTimeout)
	defer ccancel()
	if cerr := sc.Close(cctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("share group %s: %w", run.group, cerr))
	}
	return err
}

// printShared prints the records polled, accepting each once written
// out, until -n records or an interrupt.
func printShared(ctx context.Context, sc *client.ShareConsumer, w *bufio.Writer, asJSON bool, run shareRun) error {
	seen := 0
	for run.count <= 0 || seen < run.count {
		recs, err := sc.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return fmt.Errorf("share group %s: %w", run.group, err)
		}
		var printed []*client.ShareRecord
		for _, r := range recs {
			if run.count > 0 && seen >= run.count {
				break // the rest is released on close
			}
			seen++
			if asJSON {
				writeJSONShareRecord(w, r)
			} else {
				run.pf.write(w, &r.Record)
			}
			printed = append(printed, r)
		}
		if err := w.Flush(); err != nil {
			return err // nothing of this batch accepted: it goes back to the group
		}
		for _, r := range printed {
			r.Accept()
		}
		if err := sc.Flush(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("share group %s: %w", run.group, err)
		}
	}
	return nil
}

// writeJSONShareRecord is writeJSONRecord with the delivery count.
func writeJSONShareRecord(w *bufio.Writer, r *client.ShareRecord) {
	var line bytes.Buffer
	writeJSONRecord(&line, &r.Record)
	b := bytes.TrimSuffix(line.Bytes(), []byte("}\n"))
	w.Write(b)
	fmt.Fprintf(w, ",\"delivery_count\":%d}\n", r.DeliveryCount)
}
