package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// topicElectLeadersCmd moves leadership back to the preferred replicas
// (Kafka's kafka-leader-election.sh --election-type preferred).
func topicElectLeadersCmd(g *globalFlags) *cobra.Command {
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "elect-leaders TOPIC [--partition P]...",
		Short: "Move leadership to each partition's preferred replica now",
		Long: `Move the leadership of the partitions named with --partition, or of every
partition of the topic, to their preferred (first assigned) replicas now,
as the controller does on its own with auto.leader.rebalance.enable. A
partition its preferred replica leads already is reported and is no failure;
one whose preferred replica is down or out of sync
(PREFERRED_LEADER_NOT_AVAILABLE) fails the command.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			got, err := cl.ElectLeaders(ctx, args[0], partitions...)
			if err != nil {
				return fmt.Errorf("elect leaders of %s: %w", args[0], err)
			}
			type result struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Status    string `json:"status"`
			}
			results := make([]result, len(got))
			var firstErr error
			for i, e := range got {
				results[i] = result{e.Topic, e.Partition, "elected"}
				switch {
				case e.Err == nil:
				case client.ErrorCode(e.Err) == quirev1.ErrorCode_ELECTION_NOT_NEEDED:
					results[i].Status = "already led by its preferred replica"
				default:
					results[i].Status = e.Err.Error()
					if firstErr == nil {
						firstErr = fmt.Errorf("elect the leader of %s-%d: %w", e.Topic, e.Partition, e.Err)
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
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "a partition to elect the leader of (repeatable); default: every partition of the topic")
	return cmd
}
