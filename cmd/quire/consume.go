package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newConsumeCmd) }

func newConsumeCmd(g *globalFlags) *cobra.Command {
	var (
		partitions []int32
		offset     string
		count      int
		format     string
		group      string
		instance   string
		isolation  string
		interval   time.Duration
		reset      string
		shareGroup string
		keyOrdered bool
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Consume prints the records of a topic's partitions (all, or those given with
-p) from a start position: start, end, an exact offset, or @TIMESTAMP (ms
since the epoch, or RFC 3339). With -n N it stops after N records (N must
be positive); without -n it follows the topic until interrupted.

An exact -o OFFSET outside a partition's log fails with the valid range
("valid offsets are 0 to 2 (log end 3)"); --reset earliest or latest
restarts there instead (Kafka's auto.offset.reset). Other starts, and
offsets that fall out of range while following, restart at the earliest
offset unless --reset says otherwise. Without --group, -o end, -o
@TIMESTAMP and an -o OFFSET moved by --reset say on standard error at
which offset each partition starts ("starting T at 0:5, 1:3").

A topic that does not exist is created with the broker's defaults when the
broker allows it (auto.create.topics.enable, on with --dev), saying so on
standard error, exactly as quire produce does; otherwise both fail at once.

The -f format prints each record with these verbs:
  %v value   %k key   %p partition   %o offset   %t timestamp (ms)
  %T topic   %h headers (k=v,...)   %%  a percent sign
and the escapes \n, \t and \\. The default is '%v\n'. --format json prints
one JSON object per record instead.

With --group G it starts each partition at the offset the consumer group G
committed. Where G committed none it starts at -o when given, else where
--reset says (Kafka's auto.offset.reset): earliest, the log start (the
default); latest, the log end; none, an error naming the partitions. It
says on standard error where each partition starts and why ("group G:
starting T at 0:5 (partition:offset; no committed offset, so --reset
latest: ...)"). It commits what it printed (the next offset to read) at
most once per --commit-interval and on exit, so the next run with --group
G continues where this one stopped.
Records are committed only once written out: after a crash or a failed
write, the next run prints again what was not committed. With -p the
partitions are the ones named, read without joining the group (which
must have no members then).

With --group G and no -p it joins G as a member: the group coordinator
assigns it some of the topic's partitions and moves them as members come
and go (Ctrl-C leaves the group at once). Each partition starts at G's
committed offset, else at -o (start or end) or --reset as above, and is
named on standard error as it is assigned. Positions are committed every
--commit-interval, when a partition is taken away and on exit; a run cut
short by a crash prints again what it printed after its last commit.
With --instance-id ID the member is static (group.instance.id): on exit
it keeps its place for the group's session timeout, and the next run with
the same ID takes its partitions back with no rebalance.

With --share G it is a member of the share group G (a queue: see
docs/share-groups.md): every member reads every partition, the node hands
each record to one member at a time, and this one accepts each record once
printed (one acknowledgement per batch printed). Records it holds when it
stops (Ctrl-C, -n) go back to the group at once. --key-ordered asks for
the group's per-key ordering (share.key.ordering): the records of one key
go to one member at a time, in offset order. Where a partition the group
has not read before starts is the broker's share.auto.offset.reset.
--share takes none of -p, -o, --reset, --group, --instance-id,
--isolation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := parseOffset(offset)
			if err != nil {
				return err
			}
			resetOpt, err := parseReset(reset, cmd.Flags().Changed("reset"), start)
			if err != nil {
				return err
			}
			// Left out, -n follows the topic; given, it is a count, and 0
			// or a negative number is a mistake rather than another way
			// to say "follow" (Kafka's console consumer would wait forever
			// on --max-messages 0 without a word).
			if cmd.Flags().Changed("num") && count <= 0 {
				return fmt.Errorf("bad -n %d: the number of records to print must be positive (leave -n out to follow the topic until interrupted)", count)
			}
			if interval < 0 {
				return fmt.Errorf("bad --commit-interval %v: must be >= 0", interval)
			}
			if instance != "" && (group == "" || len(partitions) > 0) {
				return fmt.Errorf("--instance-id makes a group member static: it needs --group and no -p")
			}
			pf, err := compileFormat(format)
			if err != nil {
				return err
			}
			if shareGroup != "" || keyOrdered {
				if err := checkShareFlags(cmd, shareGroup); err != nil {
					return err
				}
				return consumeShared(cmd, g, shareRun{topic: args[0], group: shareGroup, keyOrdered: keyOrdered, count: count, pf: pf})
			}
			ctx, cancel := cmdContext()
			defer cancel()
			opts := []client.Opt{resetOpt}
			switch isolation {
			case "read_committed":
				opts = append(opts, client.ReadCommitted())
			case "read_uncommitted":
				opts = append(opts, client.ReadUncommitted())
			case "":
				// The client's default: read_committed with --group,
				// read_uncommitted without.
			default:
				return fmt.Errorf("bad --isolation %q: read_uncommitted or read_committed", isolation)
			}
			cl, err := newClient(ctx, g, opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			topic := args[0]
			n, err := openTopic(ctx, cl, topic, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fallback, why := groupFallback(start, cmd.Flags().Changed("offset"), offset, reset)
			if group != "" && len(partitions) == 0 {
				return consumeAsMember(ctx, cmd, cl, g, memberRun{topic: topic, group: group, instance: instance, offset: offset,
					fallback: fallback, why: why, count: count, interval: interval, pf: pf})
			}
			assign := map[int32]client.Offset{}
			if len(partitions) == 0 {
				for p := int32(0); p < n; p++ {
					assign[p] = start
				}
			}
			for _, p := range partitions {
				if p < 0 || p >= n {
					return fmt.Errorf("topic %s has no partition %d (it has %d)", topic, p, n)
				}
				assign[p] = start
			}
			if group != "" {
				if err := resolveGroupStarts(ctx, cl, group, topic, assign, fallback, why, cmd.ErrOrStderr()); err != nil {
					return err
				}
			} else if err := resolveStarts(ctx, cl, topic, assign, start, offset, resetPolicy(reset, start), cmd.ErrOrStderr()); err != nil {
				return err
			}
			cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
			if err != nil {
				return err
			}
			defer cons.Close()
			gc := newGroupCommitter(group, interval, func(ctx context.Context, offsets []client.OffsetCommit) error {
				return cl.CommitOffsets(ctx, group, offsets...)
			})
			w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			defer w.Flush()
			seen := 0
			for count <= 0 || seen < count {
				// With offsets waiting, the poll ends when they are due, so
				// that a consumer with nothing new to read commits on time.
				pctx, cancel := ctx, context.CancelFunc(func() {})
				if at, ok := gc.dueAt(); ok {
					pctx, cancel = context.WithDeadline(ctx, at)
				}
				recs, err := cons.Poll(pctx)
				due := errors.Is(pctx.Err(), context.DeadlineExceeded)
				cancel()
				// With --reset none an offset out of range ends the run once
				// what was read with it is printed.
				var fatal error
				if err != nil {
					switch {
					case ctx.Err() != nil && errors.Is(err, ctx.Err()):
						return gc.final() // interrupted
					case due && errors.Is(err, context.DeadlineExceeded):
						// Nothing new: the commit below is due.
					case len(recs) == 0:
						return errors.Join(outOfRangeHint(err), gc.final())
					case client.ErrorCode(err) == quirev1.ErrorCode_OFFSET_OUT_OF_RANGE:
						fatal = outOfRangeHint(err)
					default:
						fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
					}
				}
				for _, r := range recs {
					if count > 0 && seen >= count {
						break
					}
					seen++
					gc.stage(r)
					if g.format == "json" {
						writeJSONRecord(w, r)
					} else {
						pf.write(w, r)
					}
				}
				if err := w.Flush(); err != nil {
					// What this batch staged may not have been written
					// out: commit only the batches before it.
					gc.unstage()
					return errors.Join(err, gc.final())
				}
				gc.printed()
				if fatal != nil {
					return errors.Join(fatal, gc.final())
				}
				if err := gc.commitIfDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
					return errors.Join(err, gc.final())
				}
			}
			return gc.final()
		},
	}
	f := cmd.Flags()
	f.Int32SliceVarP(&partitions, "partitions", "p", nil, "partitions to read (default all), comma-separated")
	f.StringVarP(&offset, "offset", "o", "start", "start at start, end, OFFSET or @TIMESTAMP")
	f.StringVar(&reset, "reset", "", "where an offset out of range restarts, and with --group where a partition the group never committed in starts (unless -o is given): earliest, latest or none (fail, naming the partitions); default none for -o OFFSET, else earliest")
	f.IntVarP(&count, "num", "n", 0, "stop after this many records, a positive number (default: follow until interrupted)")
	f.StringVarP(&format, "print-format", "f", `%v\n`, "format of each record (see above)")
	f.StringVarP(&group, "group", "g", "", "consumer group: join it (without -p), start at its committed offsets (else -o, else --reset) and commit what is printed")
	// Kafka's auto.commit.interval.ms default: each commit is a metadata
	// log entry, so not one per poll.
	f.StringVar(&instance, "instance-id", "", "with --group and no -p, a static member's instance id (group.instance.id): a restart with it within the session timeout takes the same partitions back")
	f.DurationVar(&interval, "commit-interval", 5*time.Second, "with --group, commit at most this often (0: after every batch), and on exit")
	f.StringVar(&shareGroup, "share", "", "share group: read as one of its members, each record handed to one member at a time, and accept each record printed")
	f.BoolVar(&keyOrdered, "key-ordered", false, "with --share, ask for the share group's per-key ordering (records of a key to one member at a time, in order)")
	f.StringVar(&isolation, "isolation", "", "read_committed: only records of committed transactions (and of none), up to the last stable offset; read_uncommitted: every record (default read_committed with --group, read_uncommitted without)")
	return cmd
}

// groupCommitter commits, for consume --group, the offset after the last
// record printed of each partition. A batch's records are staged while
// they are written and become committable (printed) only once the output
// was flushed, so that a failed write does not commit records the user
// never got.
type groupCommitter struct {
	group    string // "" commits nothing
	interval time.Duration
	commit   func(ctx context.Context, offsets []client.OffsetCommit) error

	staged  map[int32]client.OffsetCommit // this batch, not yet flushed
	next    map[int32]client.OffsetCommit // printed: what a commit sends
	dirty   bool                          // next holds offsets not yet committed
	last    time.Time                     // of the last commit attempt
	lastErr error                         // of the last commit attempt
}

// Commit timeouts on the way out: the usual one, and a short one after a
// commit that just failed, which would most likely fail again the same way
// (and was retried for as long already).
const (
	finalCommitTimeout      = 15 * time.Second
	finalRetryCommitTimeout = 2 * time.Second
)

func newGroupCommitter(group string, interval time.Duration, commit func(context.Context, []client.OffsetCommit) error) *groupCommitter {
	return &groupCommitter{group: group, interval: interval, commit: commit, last: time.Now(),
		staged: map[int32]client.OffsetCommit{}, next: map[int32]client.OffsetCommit{}}
}

// stage notes a record about to be written out.
func (gc *groupCommitter) stage(r *client.Record) {
	if gc.group == "" {
		return
	}
	// The batch's epoch, when the batch carries one (a batch written
	// before the leader stamped it has -1); the client's zero value would
	// claim epoch 0.
	epoch := r.LeaderEpoch
	if epoch < 0 {
		epoch = -1
	}
	gc.staged[r.Partition] = client.OffsetCommit{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset + 1, LeaderEpoch: epoch}
}

// unstage drops what was staged since the last flush, which failed.
func (gc *groupCommitter) unstage() { clear(gc.staged) }

// printed makes what was staged committable: the output was flushed.
func (gc *groupCommitter) printed() {
	for p, o := range gc.staged {
		gc.next[p] = o
		gc.dirty = true
	}
	clear(gc.staged)
}

// dueAt returns when the offsets waiting become due, if any are waiting.
func (gc *groupCommitter) dueAt() (time.Time, bool) {
	return gc.last.Add(gc.interval), gc.dirty
}

// commitIfDue commits the printed offsets if an interval has passed since
// the last commit.
func (gc *groupCommitter) commitIfDue(ctx context.Context, now time.Time) error {
	if at, ok := gc.dueAt(); !ok || now.Before(at) {
		return nil
	}
	return gc.commitNow(ctx, now)
}

func (gc *groupCommitter) commitNow(ctx context.Context, now time.Time) error {
	if !gc.dirty {
		return nil
	}
	offsets := make([]client.OffsetCommit, 0, len(gc.next))
	for _, o := range gc.next {
		offsets = append(offsets, o)
	}
	slices.SortFunc(offsets, func(a, b client.OffsetCommit) int { return cmp.Compare(a.Partition, b.Partition) })
	gc.last = now
	if err := gc.commit(ctx, offsets); err != nil {
		err = fmt.Errorf("commit offsets of group %s: %w", gc.group, err)
		if ctx.Err() == nil {
			// A commit cut short by an interrupt did not fail: the
			// final one still gets its full time.
			gc.lastErr = err
		}
		return err
	}
	gc.dirty, gc.lastErr = false, nil
	return nil
}

// final commits what is left on the way out, also after an interrupt
// (whose signal cancelled the command's context); only what was printed:
// a batch whose flush failed was unstaged.
func (gc *groupCommitter) final() error {
	timeout := finalCommitTimeout
	if gc.lastErr != nil {
		timeout = finalRetryCommitTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return gc.commitNow(ctx, time.Now())
}

// parseReset turns --reset into the client's policy for an offset out of
// range (Kafka's auto.offset.reset). Unset, an exact -o OFFSET fails
// (none): the user asked for that offset, and starting elsewhere would
// hide the mistake; any other start restarts at the earliest offset kept.
func parseReset(s string, given bool, start client.Offset) (client.Opt, error) {
	if !given {
		if start.Exact() {
			s = "none"
		} else {
			s = "earliest"
		}
	}
	switch s {
	case "earliest":
		return client.ConsumeResetOffset(client.AtStart()), nil
	case "latest":
		return client.ConsumeResetOffset(client.AtEnd()), nil
	case "none":
		return client.ConsumeResetNone(), nil
	}
	return nil, fmt.Errorf("bad --reset %q: earliest, latest or none", s)
}

// outOfRangeHint adds to an offset out of range what to do about it.
func outOfRangeHint(err error) error {
	if client.ErrorCode(err) != quirev1.ErrorCode_OFFSET_OUT_OF_RANGE {
		return err
	}
	return fmt.Errorf("%w (--reset earliest or latest restarts there instead)", err)
}

func parseOffset(s string) (client.Offset, error) {
	switch s {
	case "start", "oldest", "earliest", "beginning":
		return client.AtStart(), nil
	case "end", "newest", "latest":
		return client.AtEnd(), nil
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		if ms, err := strconv.ParseInt(ts, 10, 64); err == nil {
			return client.AtTimestamp(time.UnixMilli(ms)), nil
		}
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return client.Offset{}, fmt.Errorf("bad timestamp %q: ms since the epoch or RFC 3339", ts)
		}
		return client.AtTimestamp(t), nil
	}
	o, err := strconv.ParseInt(s, 10, 64)
	if err != nil || o < 0 {
		return client.Offset{}, fmt.Errorf("bad --offset %q: start, end, OFFSET or @TIMESTAMP", s)
	}
	return client.At(o), nil
}

// recordFormat is a compiled -f format: literal text and verbs.
type recordFormat []formatPart

type formatPart struct {
	lit  string
	verb byte
}

func compileFormat(f string) (recordFormat, error) {
	var out recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(f[i])
			}
		case c == '%' && i+1 < len(f):
			i++
			switch v := f[i]; v {
			case '%':
				lit.WriteByte('%')
			case 'v', 'k', 'p', 'o', 't', 'T', 'h':
				flush()
				out = append(out, formatPart{verb: v})
			default:
				return nil, fmt.Errorf("unknown format verb %%%c", v)
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

func (f recordFormat) write(w *bufio.Writer, r *client.Record) {
	var num [20]byte
	for _, p := range f {
		switch p.verb {
		case 0:
			w.WriteString(p.lit)
		case 'v':
			w.Write(r.Value)
		case 'k':
			w.Write(r.Key)
		case 'p':
			w.Write(strconv.AppendInt(num[:0], int64(r.Partition), 10))
		case 'o':
			w.Write(strconv.AppendInt(num[:0], r.Offset, 10))
		case 't':
			w.Write(strconv.AppendInt(num[:0], r.Timestamp.UnixMilli(), 10))
		case 'T':
			w.WriteString(r.Topic)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
}

type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func writeJSONRecord(w io.Writer, r *client.Record) {
	jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	if r.Key != nil {
		k := string(r.Key)
		jr.Key = &k
	}
	if r.Value != nil {
		v := string(r.Value)
		jr.Value = &v
	}
	if len(r.Headers) > 0 {
		jr.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			jr.Headers[h.Key] = string(h.Value)
		}
	}
	b, _ := json.Marshal(jr)
	w.Write(append(b, '\n'))
}
