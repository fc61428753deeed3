package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// A share group's start offsets, as Kafka's kafka-share-groups.sh
// --describe --offsets and --reset-offsets: group share-offsets and group
// share-seek.

// shareOffsetLine is one line of share-offsets --format json.
type shareOffsetLine struct {
	client.ShareGroupOffset
	Error string `json:"error,omitempty"`
}

func groupShareOffsetsCmd(g *globalFlags) *cobra.Command {
	var topics []string
	cmd := &cobra.Command{
		Use:   "share-offsets GROUP [--topic T]...",
		Short: "Show a share group's start offset and lag per partition",
		Long: `Show a share group's start offset per partition, as Kafka's
kafka-share-groups.sh --describe --offsets: every record below it is
finished (accepted or archived), so the group's members go on from there.
LAG counts the records below the high watermark not finished yet.
START-OFFSET is - for a partition the group has no state on yet (its next
member starts from share.auto.offset.reset), LAG - where the partition's
leader could not be asked. With --topic, every partition of those topics;
without, every partition the group has a state on. A partition refused (an
unknown topic or partition, one not authorized) is named on standard error
and the command fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			got, err := cl.DescribeShareGroupOffsets(ctx, group, topics...)
			if err != nil {
				return fmt.Errorf("share group %s: %w", group, err)
			}
			var failed []client.ShareGroupOffset
			lines := make([]shareOffsetLine, 0, len(got))
			rows := [][]string{}
			for _, o := range got {
				l := shareOffsetLine{ShareGroupOffset: o}
				if o.Err != nil {
					l.Error = o.Err.Error()
					failed = append(failed, o)
				} else {
					rows = append(rows, []string{group, o.Topic, strconv.Itoa(int(o.Partition)), orDash(o.StartOffset), orDash(o.Lag)})
				}
				lines = append(lines, l)
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				err = printJSON(out, lines)
			} else {
				err = printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"}, rows)
			}
			return errors.Join(err, shareOffsetsRefused(group, "describe", failed, len(got)))
		},
	}
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "show every partition of this topic (repeatable); default: every partition the group has a state on")
	return cmd
}

// shareSeekLine is one line of share-seek: a partition's start offset
// before (-1: no state, or the group was never seen) and the one set.
type shareSeekLine struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Previous  int64  `json:"previous"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error,omitempty"`
}

func groupShareSeekCmd(g *globalFlags) *cobra.Command {
	var (
		to         string
		topics     []string
		partitions []int32
		dryRun     bool
	)
	cmd := &cobra.Command{
		Use:   "share-seek GROUP --to start|end|OFFSET|@TIMESTAMP --topic T [--partition P]...",
		Short: "Move the start offsets of a share group with no members",
		Long: `Move a share group's start offsets, as Kafka's kafka-share-groups.sh
--reset-offsets, for a share group with no members (stop its consumers
first): to the log start (start), the high watermark (end), an exact
OFFSET, or the first record at or after @TIMESTAMP (RFC 3339, or
milliseconds since the epoch; the high watermark where there is none).
Each partition starts anew there, nothing in flight, its delivery counts
gone: the group's next member reads from it. An OFFSET past the log's end
waits for the log to get there; one below the log start offset starts at
the log start. Every partition of the --topic topics, or those named with
--partition (with a single --topic). A group never seen is made. --dry-run
only prints what it would set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			at, err := parseShareSeekTarget(to)
			if err != nil {
				return err
			}
			if len(topics) == 0 {
				return errors.New("share-seek: --topic is required")
			}
			if len(partitions) > 0 && len(topics) > 1 {
				return fmt.Errorf("share-seek: --partition goes with a single --topic, got %d topics", len(topics))
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			var offsets []client.ShareOffset
			for _, topic := range topics {
				resolved, err := cl.ListOffsets(ctx, topic, at, partitions...)
				if err != nil {
					return fmt.Errorf("share-seek: offsets of %s: %w", topic, err)
				}
				var none []int32 // --to @TIMESTAMP with no record at or after it
				for _, p := range slices.Sorted(maps.Keys(resolved)) {
					if resolved[p] < 0 {
						none = append(none, p)
					}
				}
				if len(none) > 0 {
					ends, err := cl.ListOffsets(ctx, topic, client.AtEnd(), none...)
					if err != nil {
						return fmt.Errorf("share-seek: high watermarks of %s: %w", topic, err)
					}
					for p, o := range ends {
						resolved[p] = o
					}
				}
				for _, p := range slices.Sorted(maps.Keys(resolved)) {
					offsets = append(offsets, client.ShareOffset{Topic: topic, Partition: p, Offset: resolved[p]})
				}
			}
			previous := map[client.TopicPartition]int64{}
			before, err := cl.DescribeShareGroupOffsets(ctx, group, topics...)
			if err != nil && client.ErrorCode(err) != quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
				return fmt.Errorf("share group %s: %w", group, err)
			}
			for _, o := range before {
				if o.Err == nil {
					previous[client.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.StartOffset
				}
			}
			results := make([]client.ShareGroupOffset, len(offsets))
			for i, o := range offsets {
				results[i] = client.ShareGroupOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.Offset}
			}
			if !dryRun {
				if results, err = cl.AlterShareGroupOffsets(ctx, group, offsets...); err != nil {
					return fmt.Errorf("share group %s: %w", group, err)
				}
			}
			var failed []client.ShareGroupOffset
			lines := make([]shareSeekLine, 0, len(results))
			rows := [][]string{}
			for _, r := range results {
				prev, ok := previous[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}]
				if !ok {
					prev = -1
				}
				l := shareSeekLine{Topic: r.Topic, Partition: r.Partition, Previous: prev, Offset: r.StartOffset}
				if r.Err != nil {
					l.Error = r.Err.Error()
					failed = append(failed, r)
				} else {
					rows = append(rows, []string{group, r.Topic, strconv.Itoa(int(r.Partition)), orDash(prev), strconv.FormatInt(r.StartOffset, 10)})
				}
				lines = append(lines, l)
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				err = printJSON(out, lines)
			} else {
				err = printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"}, rows)
			}
			return errors.Join(err, shareOffsetsRefused(group, "set", failed, len(results)))
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "start, end, OFFSET or @TIMESTAMP (required)")
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "move every partition of this topic (repeatable; required)")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "move only this partition of the --topic (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the new start offsets without setting them")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// parseShareSeekTarget reads group share-seek's --to as the position
// ListOffsets resolves.
func parseShareSeekTarget(s string) (client.Offset, error) {
	bad := func(why string) (client.Offset, error) {
		return client.Offset{}, fmt.Errorf("--to %q: %s (want start, end, OFFSET or @TIMESTAMP)", s, why)
	}
	switch {
	case s == "start" || s == "earliest":
		return client.AtStart(), nil
	case s == "end" || s == "latest":
		return client.AtEnd(), nil
	case strings.HasPrefix(s, "shift:"):
		return bad("a share group has no committed offset to shift from")
	case strings.HasPrefix(s, "@"):
		t, err := parseSeekTime(strings.TrimPrefix(s, "@"))
		if err != nil {
			return bad(err.Error())
		}
		return client.AtTimestamp(t), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return bad("unknown target")
	}
	if n < 0 {
		return bad("a negative offset")
	}
	return client.At(n), nil
}

// shareOffsetsRefused is the error naming the partitions whose results
// were refusals; nil when none was.
func shareOffsetsRefused(group, verb string, failed []client.ShareGroupOffset, of int) error {
	if len(failed) == 0 {
		return nil
	}
	errs := make([]error, len(failed))
	for i, o := range failed {
		where := fmt.Sprintf("%s-%d", o.Topic, o.Partition)
		if o.Partition < 0 {
			where = o.Topic
		}
		errs[i] = fmt.Errorf("  %s: %w", where, o.Err)
	}
	return fmt.Errorf("share group %s: %s refused for %d of %d:\n%w", group, verb, len(failed), of, errors.Join(errs...))
}

// orDash is v, or "-" when it is negative (unknown, or none).
func orDash(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}
