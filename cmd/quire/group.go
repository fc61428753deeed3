package main

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newGroupCmd) }

func newGroupCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe and delete consumer groups",
		Long: `A consumer group is a group id with committed offsets and, for groups
consumed with consume -g, members the coordinator assigns partitions to.
describe shows the members and, per partition, the committed offset, the
high watermark and the lag in records and in seconds (now minus the
timestamp of the first record not committed; 0 when caught up).`,
	}
	cmd.AddCommand(groupListCmd(g), groupDescribeCmd(g), groupDeleteCmd(g))
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
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, and committed offset, high watermark and lag (records and seconds) per partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			group := args[0]
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
			fmt.Fprintf(out, "group %s: %s, epoch %d, assignor %s, %d members\n\n", d.Group, d.State, d.GroupEpoch, cmp.Or(d.Assignor, "-"), len(d.Members))
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
					unknown(r.HighWatermark), unknown(r.Lag), secs, member})
			}
			return printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-SECONDS", "MEMBER"}, table)
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
