package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// groupConfigCmd shows a share group's settings, or changes them with
// -c key=value and --delete key (Kafka's GROUP config resource).
func groupConfigCmd(g *globalFlags) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:   "config GROUP [-c key=value]... [--delete key]...",
		Short: "Show or change a share group's settings (share.key.ordering, errors.deadletterqueue.topic.name, ...)",
		Long: `Without -c or --delete, prints each setting of the share group, its value
and where it comes from (group: set on the group; broker: the node's).
-c key=value sets a key on the group, --delete key returns it to the
node's value. The keys: share.key.ordering, errors.deadletterqueue.topic.name,
share.record.lock.duration.ms, share.delivery.count.limit,
share.auto.offset.reset (earliest, latest, by_duration:PT1H),
max.in.flight.per.key (with key ordering), share.isolation.level
(read_uncommitted, read_committed), share.partition.max.record.locks,
errors.deadletterqueue.copy.record.enable (dead letters carry the
record's key and value). The dead-letter topic must start
with the node's errors.deadletterqueue.topic.name.prefix (dlq.) and have
errors.deadletterqueue.group.enable=true. They are kept
in the metadata log and apply on every node.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := parseKV(set)
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if len(kv) > 0 || len(del) > 0 {
				if err := cl.AlterGroupConfigs(ctx, args[0], kv, del...); err != nil {
					return err
				}
				if g.format == "json" {
					return printJSON(cmd.OutOrStdout(), map[string]any{"group": args[0], "set": kv, "deleted": del})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "altered %s\n", args[0])
				return nil
			}
			entries, err := cl.DescribeGroupConfigs(ctx, args[0])
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), entries)
			}
			rows := make([][]string, len(entries))
			for i, e := range entries {
				rows[i] = []string{e.Name, e.Value, e.Source}
			}
			return printTable(cmd.OutOrStdout(), []string{"KEY", "VALUE", "SOURCE"}, rows)
		},
	}
	cmd.Flags().StringArrayVarP(&set, "config", "c", nil, "setting key=value to set on the group (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "setting to return to the node's value (repeatable)")
	return cmd
}
