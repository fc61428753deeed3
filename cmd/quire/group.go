package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newGroupCmd) }

func newGroupCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, delete and seek consumer groups' committed offsets",
		Long: `A consumer group here is a group id with committed offsets (Kafka's simple
consumer group: no members or rebalancing yet). consume --group commits
them; these verbs read and delete them.`,
	}
	cmd.AddCommand(groupListCmd(g), groupDescribeCmd(g), groupDeleteCmd(g), groupSeekCmd(g))
	return cmd
}

func groupListCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the groups with committed offsets",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			groups, err := cl.ListGroups(ctx)
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), groups)
			}
			rows := [][]string{}
			for _, name := range groups {
				rows = append(rows, []string{name})
			}
			return printTable(cmd.OutOrStdout(), []string{"GROUP"}, rows)
		},
	}
}

// groupPartition is one line of group describe. LogEndOffset is the
// partition's latest offset as consumers see it (the high watermark, from
// ListOffsets), -1 when it could not be read; Lag is then -1 too.
type groupPartition struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	CommittedOffset int64  `json:"committed_offset"`
	LogEndOffset    int64  `json:"log_end_offset"`
	Lag             int64  `json:"lag"`
	LeaderEpoch     int32  `json:"leader_epoch"`
	Metadata        string `json:"metadata,omitempty"`
	CommitTimeMs    int64  `json:"commit_time_ms"`
}

func groupDescribeCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's committed offset, log end offset and lag per partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			group := args[0]
			offsets, err := cl.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			if len(offsets) == 0 {
				return fmt.Errorf("group %s has no committed offsets", group)
			}
			byTopic := map[string][]int32{}
			for _, o := range offsets {
				byTopic[o.Topic] = append(byTopic[o.Topic], o.Partition)
			}
			ends := map[client.TopicPartition]int64{}
			for topic, parts := range byTopic {
				got, err := cl.ListOffsets(ctx, topic, client.AtEnd(), parts...)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: log end offsets of %s: %v\n", topic, err)
					continue
				}
				for p, off := range got {
					ends[client.TopicPartition{Topic: topic, Partition: p}] = off
				}
			}
			rows := make([]groupPartition, 0, len(offsets))
			for _, o := range offsets {
				gp := groupPartition{Topic: o.Topic, Partition: o.Partition, CommittedOffset: o.Offset, LogEndOffset: -1, Lag: -1,
					LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
				if end, ok := ends[client.TopicPartition{Topic: o.Topic, Partition: o.Partition}]; ok {
					gp.LogEndOffset, gp.Lag = end, max(end-o.Offset, 0)
				}
				rows = append(rows, gp)
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				return printJSON(out, rows)
			}
			table := [][]string{}
			for _, r := range rows {
				end, lag := "-", "-"
				if r.LogEndOffset >= 0 {
					end, lag = fmt.Sprint(r.LogEndOffset), fmt.Sprint(r.Lag)
				}
				table = append(table, []string{group, r.Topic, fmt.Sprint(r.Partition), fmt.Sprint(r.CommittedOffset), end, lag})
			}
			return printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"}, table)
		},
	}
}

func groupDeleteCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups' committed offsets",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			type result struct {
				Group  string `json:"group"`
				Status string `json:"status"`
			}
			var results []result
			var firstErr error
			for _, name := range args {
				status := "OK"
				if err := cl.DeleteGroup(ctx, name); err != nil {
					status = err.Error()
					if firstErr == nil {
						firstErr = fmt.Errorf("delete %s: %w", name, err)
					}
				}
				results = append(results, result{name, status})
			}
			if g.format == "json" {
				if err := printJSON(cmd.OutOrStdout(), results); err != nil {
					return err
				}
			} else {
				rows := [][]string{}
				for _, r := range results {
					rows = append(rows, []string{r.Group, r.Status})
				}
				if err := printTable(cmd.OutOrStdout(), []string{"GROUP", "STATUS"}, rows); err != nil {
					return err
				}
			}
			return firstErr
		},
	}
}

func groupSeekCmd(g *globalFlags) *cobra.Command {
	var to string
	var topics []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "seek GROUP --to start|end|OFFSET|@TIMESTAMP|shift:N [--topic T]...",
		Short: "Move the committed offsets of a group with no members",
		Long: `Move a group's committed offsets, as Kafka's --reset-offsets does, for a
group with no members (stop its consumers first): to the log start (start),
the high watermark (end), an exact OFFSET, the first record at or after
@TIMESTAMP (RFC 3339, or milliseconds since the epoch), or the committed
offset shifted by N (shift:-10 goes back ten). Each offset is kept within
the partition's log. With --topic, every partition of those topics;
without, every partition the group has committed. --dry-run only prints
what it would commit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseSeekTarget(to)
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			got, err := cl.ResetOffsets(ctx, args[0], target, dryRun, topics...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				return printJSON(out, got)
			}
			rows := [][]string{}
			for _, r := range got {
				prev := "-"
				if r.Previous >= 0 {
					prev = fmt.Sprint(r.Previous)
				}
				rows = append(rows, []string{args[0], r.Topic, fmt.Sprint(r.Partition), prev, fmt.Sprint(r.Offset)})
			}
			return printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"}, rows)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "start, end, OFFSET, @TIMESTAMP or shift:N (required)")
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "reset every partition of this topic (repeatable); default: the partitions the group committed")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the new offsets without committing them")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// parseSeekTarget reads group seek's --to.
func parseSeekTarget(s string) (client.ResetTarget, error) {
	bad := func(why string) (client.ResetTarget, error) {
		return client.ResetTarget{}, fmt.Errorf("--to %q: %s (want start, end, OFFSET, @TIMESTAMP or shift:N)", s, why)
	}
	switch {
	case s == "start" || s == "earliest":
		return client.ResetToStart(), nil
	case s == "end" || s == "latest":
		return client.ResetToEnd(), nil
	case strings.HasPrefix(s, "shift:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "shift:"), 10, 64)
		if err != nil {
			return bad("the shift is not a whole number")
		}
		return client.ResetShift(n), nil
	case strings.HasPrefix(s, "@"):
		v := strings.TrimPrefix(s, "@")
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			if ms < 0 {
				return bad("a negative timestamp")
			}
			return client.ResetToTime(time.UnixMilli(ms)), nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("the timestamp is neither RFC 3339 nor milliseconds since the epoch")
		}
		return client.ResetToTime(t), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return bad("unknown target")
	}
	if n < 0 {
		return bad("a negative offset")
	}
	return client.ResetToOffset(n), nil
}
