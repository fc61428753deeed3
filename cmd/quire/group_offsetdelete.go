package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// groupDeleteOffsetsCmd removes some of a group's committed offsets
// (Kafka's kafka-consumer-groups --delete-offsets).
func groupDeleteOffsetsCmd(g *globalFlags) *cobra.Command {
	var (
		topic      string
		partitions []int32
	)
	cmd := &cobra.Command{
		Use:   "delete-offsets GROUP --topic T [--partition P]...",
		Short: "Delete a group's committed offsets of a topic's partitions",
		Long: `Delete a group's committed offsets of the partitions named with
--partition, or of every partition of the topic. The offsets of a topic a
member of the group is subscribed to stay (GROUP_SUBSCRIBED_TO_TOPIC): stop
the group's consumers of it first. A partition the group never committed in
has nothing to delete and is OK.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" {
				return fmt.Errorf("delete-offsets: --topic is required")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			got, err := cl.DeleteOffsets(ctx, args[0], topic, partitions...)
			if err != nil {
				return fmt.Errorf("delete offsets of group %s: %w", args[0], err)
			}
			type result struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Status    string `json:"status"`
			}
			results := make([]result, len(got))
			var firstErr error
			for i, d := range got {
				results[i] = result{d.Topic, d.Partition, "OK"}
				if d.Err != nil {
					results[i].Status = d.Err.Error()
					if firstErr == nil {
						firstErr = fmt.Errorf("delete offsets of %s-%d: %w", d.Topic, d.Partition, d.Err)
					}
				}
			}
			if g.format == "json" {
				if err := printJSON(cmd.OutOrStdout(), results); err != nil {
					return err
				}
			} else {
				rows := make([][]string, len(results))
				for i, r := range results {
					rows[i] = []string{r.Topic, strconv.Itoa(int(r.Partition)), r.Status}
				}
				if err := printTable(cmd.OutOrStdout(), []string{"TOPIC", "PARTITION", "STATUS"}, rows); err != nil {
					return err
				}
			}
			return firstErr
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic whose offsets to delete (required)")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "a partition to delete the offset of (repeatable); default: every partition of the topic")
	return cmd
}
