package main

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newGroupCmd) }

func newGroupCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, delete and seek consumer groups",
		Long: `A consumer group is a group id with committed offsets and, for groups
consumed with consume -g (or a Subscribe stream), members the coordinator
assigns partitions to. describe shows the members and, per partition, the
committed offset, the high watermark and the lag in records and in seconds
(now minus the timestamp of the first record not committed; 0 when caught
up); seek moves the committed offsets of a group with no members.

describe shows a share group (consume --share) too: its members and, per
partition, the records in flight (held by a member), available (waiting
for one), the oldest lock (the in-flight record whose lock runs out
first: its offset, member, time left and delivery count) and the records
dead-lettered, as the broker serving the group has them. share-offsets
shows a share group's start offset (every record below it finished) and
lag per partition; share-seek moves the start offsets of a share group
with no members.`,
	}
	cmd.AddCommand(groupListCmd(g), groupDescribeCmd(g), groupDeleteCmd(g), groupDeleteOffsetsCmd(g), groupSeekCmd(g), groupConfigCmd(g),
		groupShareOffsetsCmd(g), groupShareSeekCmd(g)) // group_share_offsets.go
	return cmd
}

func groupListCmd(g *globalFlags) *cobra.Command {
	var state bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the groups with committed offsets or members (--state: with their states)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			listed, err := cl.ListGroupStates(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !state {
				names := make([]string, len(listed))
				rows := make([][]string, len(listed))
				for i, l := range listed {
					names[i], rows[i] = l.Group, []string{l.Group}
				}
				if g.format == "json" {
					return printJSON(out, names)
				}
				return printTable(out, []string{"GROUP"}, rows)
			}
			if g.format == "json" {
				return printJSON(out, listed)
			}
			rows := make([][]string, len(listed))
			for i, l := range listed {
				rows[i] = []string{l.Group, cmp.Or(l.State, "-")}
			}
			return printTable(out, []string{"GROUP", "STATE"}, rows)
		},
	}
	cmd.Flags().BoolVar(&state, "state", false, "show each group's state: empty, assigning, reconciling or stable")
	return cmd
}

// groupPartition is one line of group describe: the coordinator's
// figures (client.GroupPartitionLag: committed offset, high watermark,
// lag in records and in seconds, -1 where unknown) and what was
// committed with the offset.
type groupPartition struct {
	client.GroupPartitionLag
	LeaderEpoch  int32  `json:"leader_epoch"`
	Metadata     string `json:"metadata,omitempty"`
	CommitTimeMs int64  `json:"commit_time_ms"`
}

// groupDescription is group describe's JSON: the group's state and
// members, and its position per partition.
type groupDescription struct {
	client.GroupDescription
	Partitions []groupPartition `json:"partitions"`
}

func groupDescribeCmd(g *globalFlags) *cobra.Command {
	var members bool
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, throughput (consume and produce rates, time to drain its lag, members needed to keep up), and committed offset, high watermark and lag (records and seconds) per partition (--members: a line per member)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			group := args[0]
			if sd, err := cl.DescribeShareGroup(ctx, group); err == nil {
				return printShareGroup(cmd.OutOrStdout(), g, sd, members) // group_share.go
			} else if code := client.ErrorCode(err); code != quirev1.ErrorCode_GROUP_ID_NOT_FOUND && code != quirev1.ErrorCode_UNSUPPORTED_VERSION {
				return err
			}
			d, err := cl.DescribeGroup(ctx, group)
			if err != nil {
				return err
			}
			offsets, err := cl.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			committed := map[client.TopicPartition]client.CommittedOffset{}
			for _, o := range offsets {
				committed[client.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
			}
			desc := groupDescription{GroupDescription: d, Partitions: make([]groupPartition, 0, len(d.Partitions))}
			for _, p := range d.Partitions {
				gp := groupPartition{GroupPartitionLag: p, LeaderEpoch: -1, CommitTimeMs: -1}
				if o, ok := committed[client.TopicPartition{Topic: p.Topic, Partition: p.Partition}]; ok {
					gp.LeaderEpoch, gp.Metadata, gp.CommitTimeMs = o.LeaderEpoch, o.Metadata, o.CommitTimeMs
				}
				desc.Partitions = append(desc.Partitions, gp)
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				return printJSON(out, desc)
			}
			fmt.Fprintf(out, "group %s: %s, epoch %d, assignor %s, %d members\n", d.Group, d.State, d.GroupEpoch, cmp.Or(d.Assignor, "-"), len(d.Members))
			fmt.Fprintf(out, "%s\n\n", throughputLine(d.Throughput))
			if members {
				rows := [][]string{}
				for _, m := range d.Members {
					assigned := make([]string, len(m.Assigned))
					for i, tp := range m.Assigned {
						assigned[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
					}
					rows = append(rows, []string{group, m.MemberID, cmp.Or(m.InstanceID, "-"), cmp.Or(m.ClientAddress, "-"),
						fmt.Sprint(m.MemberEpoch), fmt.Sprint(len(m.Assigned)), cmp.Or(strings.Join(assigned, ","), "-")})
				}
				return printTable(out, []string{"GROUP", "MEMBER", "INSTANCE", "HOST", "EPOCH", "#PARTITIONS", "ASSIGNED"}, rows)
			}
			unknown := func(v int64) string {
				if v < 0 {
					return "-"
				}
				return fmt.Sprint(v)
			}
			table := [][]string{}
			for _, r := range desc.Partitions {
				secs := "-"
				if r.LagSeconds >= 0 {
					secs = fmt.Sprintf("%.1f", r.LagSeconds)
				}
				member := r.MemberID
				if member == "" {
					member = "-"
				}
				table = append(table, []string{group, r.Topic, fmt.Sprint(r.Partition), unknown(r.CommittedOffset),
					unknown(r.HighWatermark), unknown(r.Lag), unknown(r.StableLag), secs, member})
			}
			// STABLE-LAG is a read_committed consumer's lag: up to the last
			// stable offset, open transactions' records left out.
			return printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "STABLE-LAG", "LAG-SECONDS", "MEMBER"}, table)
		},
	}
	cmd.Flags().BoolVar(&members, "members", false, "a line per member (id, instance id, host, epoch, assigned partitions) instead of per partition; --format json has both always")
	return cmd
}

// throughputLine says whether a group keeps up: "lag 1200 records;
// consuming 350.0/s, produced 300.0/s; drains in 24s; members to keep
// up: 2 (of 6 partitions)", with "?" for what is not known yet.
func throughputLine(t client.GroupThroughput) string {
	rate := func(r float64) string {
		if r < 0 {
			return "?"
		}
		return fmt.Sprintf("%.1f/s", r)
	}
	lag := "?"
	if t.Lag >= 0 {
		lag = fmt.Sprint(t.Lag)
	}
	var drain string
	switch {
	case t.DrainSeconds >= 0:
		drain = "drains in " + (time.Duration(t.DrainSeconds * float64(time.Second))).Round(time.Second).String()
	case t.Lag > 0 && t.ConsumeRate >= 0 && t.ProduceRate >= 0:
		drain = "not draining (consumed no faster than produced)"
	default:
		drain = "drain time ?"
	}
	needed := "?"
	if t.MembersNeeded >= 0 {
		needed = fmt.Sprint(t.MembersNeeded)
	}
	return fmt.Sprintf("lag %s records; consumed %s, produced %s; %s; members to keep up: %s (of %d partitions)",
		lag, rate(t.ConsumeRate), rate(t.ProduceRate), drain, needed, t.Partitions)
}

func groupDeleteCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete empty groups and their committed offsets",
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
		t, err := parseSeekTime(strings.TrimPrefix(s, "@"))
		if err != nil {
			return bad(err.Error())
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

// parseSeekTime reads the TIMESTAMP of a seek's --to @TIMESTAMP: RFC
// 3339, or milliseconds since the epoch.
func parseSeekTime(v string) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, errors.New("a negative timestamp")
		}
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errors.New("the timestamp is neither RFC 3339 nor milliseconds since the epoch")
	}
	return t, nil
}
