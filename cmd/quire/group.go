package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newGroupCmd) }

func newGroupCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe and delete consumer groups' committed offsets",
		Long: `A consumer group here is a group id with committed offsets (Kafka's simple
consumer group: no members or rebalancing yet). consume --group commits
them; these verbs read and delete them.`,
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
