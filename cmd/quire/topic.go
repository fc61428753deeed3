package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newTopicCmd) }

func newTopicCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe, alter and delete topics"}
	cmd.AddCommand(topicCreateCmd(g), topicListCmd(g), topicDescribeCmd(g), topicDeleteCmd(g),
		topicAlterConfigCmd(g), topicAddPartitionsCmd(g), topicDeleteRecordsCmd(g), topicElectLeadersCmd(g))
	return cmd
}

func topicCreateCmd(g *globalFlags) *cobra.Command {
	var partitions, rf int32
	var configs []string
	cmd := &cobra.Command{
		Use:   "create NAME...",
		Short: "Create topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfgs, err := parseKV(configs)
			if err != nil {
				return err
			}
			// The client sends any value but 0, which means "the broker's
			// default"; an explicit 0 is refused here as the broker would.
			if cmd.Flags().Changed("partitions") && partitions == 0 {
				return fmt.Errorf("-p 0: partitions must be positive (omit -p for the broker's num.partitions)")
			}
			if cmd.Flags().Changed("replicas") && rf == 0 {
				return fmt.Errorf("-r 0: replication factor must be positive (omit -r for the broker's default.replication.factor)")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			var created []*client.TopicDescription
			rows := [][]string{}
			var errs []error
			for _, name := range args {
				d, err := cl.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: cfgs})
				if err != nil {
					rows = append(rows, []string{name, err.Error()})
					errs = append(errs, fmt.Errorf("create %s: %w", name, err))
					continue
				}
				created = append(created, d)
				rows = append(rows, []string{name, "OK"})
			}
			if g.format == "json" {
				if err := printJSON(cmd.OutOrStdout(), created); err != nil {
					return err
				}
				return errors.Join(errs...) // the JSON lists only what was created
			}
			if err := printTable(cmd.OutOrStdout(), []string{"TOPIC", "STATUS"}, rows); err != nil {
				return err
			}
			return failedOf(len(errs), len(args), "created")
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 0, "number of partitions (default: the broker's num.partitions)")
	cmd.Flags().Int32VarP(&rf, "replicas", "r", 0, "replication factor (default: the broker's default.replication.factor)")
	cmd.Flags().StringArrayVarP(&configs, "topic-config", "c", nil, "topic config key=value (repeatable)")
	return cmd
}

func topicListCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			ts, err := cl.ListTopics(ctx)
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			rows := [][]string{}
			for _, t := range ts {
				rows = append(rows, []string{t.Name, fmt.Sprint(t.Partitions), fmt.Sprint(t.ReplicationFactor)})
			}
			return printTable(cmd.OutOrStdout(), []string{"NAME", "PARTITIONS", "REPLICAS"}, rows)
		},
	}
}

func topicDescribeCmd(g *globalFlags) *cobra.Command {
	var allConfigs, underReplicated, producers bool
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "describe NAME | --under-replicated [NAME...] | --producers NAME",
		Short: "Show a topic's partitions (leader, replicas, ISR, offsets) and configs",
		Long: `Describe shows a topic's partitions (leader, replicas, ISR, offsets) and configs,
and its cleanup.policy; for a compacted topic, each partition's dirty ratio
(the share of its leader's cleanable bytes written since the last clean:
the cleaner takes a partition above min.cleanable.dirty.ratio).

With --producers it lists instead the idempotent producers active on each
partition (of those given with --partition, or all), as the partition's
leader knows them: producer id, epoch, the last sequence, the timestamp and
the offset of the last record of its latest batch. A producer stays listed
until producer.id.expiration.ms after its last batch.

With --under-replicated it lists instead, over the named topics or every
topic, the partitions at risk: those with fewer in-sync replicas than
replicas (UNDER-REPLICATED; a replica a reassignment is adding does not
count until it is in sync), no leader (OFFLINE), a leader that did not
answer (LEADER-UNREACHABLE: right after a broker dies, until the controller
fences it after broker.session.timeout.ms and elects new leaders), or an
in-sync follower on a broker that did not answer as the leader of another
partition (REPLICA-UNREACHABLE: it will drop out of the ISR), or a replica
whose log failed on its broker (LOG-FAILED: an I/O error; topic describe
NAME shows the directory and the error). It is what to
look at after a broker failure, and prints nothing when every partition is
fully in sync.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if underReplicated {
				return nil
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if underReplicated {
				return printUnderReplicated(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), g, cl, args)
			}
			if producers {
				return printProducers(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), g, cl, args[0], partitions)
			}
			if len(partitions) > 0 {
				return fmt.Errorf("--partition goes with --producers")
			}
			ds, err := cl.DescribeTopics(ctx, args[0])
			if err != nil {
				return err
			}
			if len(ds) == 0 {
				return fmt.Errorf("topic %s not found", args[0])
			}
			d := ds[0]
			// The effective configs, for cleanup.policy (which may come
			// from the broker default) and --print-configs.
			entries, err := cl.DescribeConfigs(ctx, d.Name)
			if err != nil {
				return err
			}
			policy := "delete"
			for _, e := range entries {
				if e.Name == "cleanup.policy" {
					policy = e.Value
				}
			}
			out := cmd.OutOrStdout()
			if g.format == "json" {
				if !allConfigs {
					entries = nil
				}
				return printJSON(out, struct {
					client.TopicDescription
					CleanupPolicy string               `json:"cleanup_policy"`
					AllConfigs    []client.ConfigEntry `json:"all_configs,omitempty"`
				}{d, policy, entries})
			}
			fmt.Fprintf(out, "NAME        %s\nID          %s\nPARTITIONS  %d\n", d.Name, d.ID, len(d.Partitions))
			if len(d.Partitions) > 0 {
				// The replication factor: a move's replicas being removed aside.
				p0 := d.Partitions[0]
				fmt.Fprintf(out, "REPLICAS    %d\n", len(p0.Replicas)-len(p0.RemovingReplicas))
			}
			fmt.Fprintf(out, "CLEANUP     %s\n", policy)
			compacted, moving := false, false
			for _, p := range d.Partitions {
				compacted = compacted || p.DirtyRatio != nil
				moving = moving || len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
			}
			fmt.Fprintln(out)
			rows := [][]string{}
			unreachable := false
			for _, p := range d.Partitions {
				leader := fmt.Sprint(p.Leader)
				if leaderUnreachable(p) {
					leader += " (unreachable)"
					unreachable = true
				}
				row := []string{fmt.Sprint(p.Partition), leader, fmt.Sprint(p.LeaderEpoch),
					int32s(p.Replicas), int32s(p.ISR), fmt.Sprint(p.LogStartOffset), fmt.Sprint(p.HighWatermark),
					fmt.Sprint(p.LogEndOffset)}
				if compacted {
					dirty := "-"
					if p.DirtyRatio != nil {
						dirty = fmt.Sprintf("%.2f", *p.DirtyRatio)
					}
					row = append(row, dirty)
				}
				if moving {
					row = append(row, int32sOrDash(p.AddingReplicas), int32sOrDash(p.RemovingReplicas))
				}
				rows = append(rows, row)
			}
			header := []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "HW", "LEO"}
			if compacted {
				header = append(header, "DIRTY-RATIO")
			}
			if moving {
				header = append(header, "ADDING", "REMOVING")
			}
			if err := printTable(out, header, rows); err != nil {
				return err
			}
			if unreachable {
				fmt.Fprintln(cmd.ErrOrStderr(), unreachableNote)
			}
			rows = rows[:0]
			for _, p := range d.Partitions {
				for _, o := range p.OfflineReplicas {
					rows = append(rows, []string{fmt.Sprint(p.Partition), fmt.Sprint(o.Broker), o.Dir, o.Error})
				}
			}
			if len(rows) > 0 {
				fmt.Fprintln(out)
				fmt.Fprintln(out, "OFFLINE REPLICAS (their log failed; the broker took them out of service)")
				if err := printTable(out, []string{"PARTITION", "BROKER", "DIR", "ERROR"}, rows); err != nil {
					return err
				}
			}
			rows = rows[:0]
			if allConfigs {
				for _, e := range entries {
					rows = append(rows, []string{e.Name, e.Value, e.Source})
				}
			} else {
				keys := make([]string, 0, len(d.Configs))
				for k := range d.Configs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					rows = append(rows, []string{k, d.Configs[k], "topic"})
				}
			}
			if len(rows) > 0 {
				fmt.Fprintln(out)
				return printTable(out, []string{"CONFIG", "VALUE", "SOURCE"}, rows)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allConfigs, "print-configs", "a", false, "show every config with its effective value and source")
	cmd.Flags().BoolVar(&underReplicated, "under-replicated", false, "list the partitions (of the named topics, or all) not fully in sync, or offline")
	cmd.Flags().BoolVar(&producers, "producers", false, "list the idempotent producers active on each partition")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "with --producers: only these partitions (repeat or comma-separate)")
	cmd.MarkFlagsMutuallyExclusive("under-replicated", "producers")
	return cmd
}

// printProducers prints the producers of the partitions of topic (all of
// them when none are given), each as its leader knows them; partitions
// whose leader could not answer are named on stderr and fail the command.
func printProducers(ctx context.Context, out, errOut io.Writer, g *globalFlags, cl *client.Client, topic string, partitions []int32) error {
	ps, err := cl.DescribeProducers(ctx, topic, partitions...)
	if err != nil {
		return err
	}
	failed := 0
	for _, p := range ps {
		if p.Err != nil {
			failed++
			fmt.Fprintf(errOut, "partition %d (leader %d): %v\n", p.Partition, p.Leader, p.Err)
		}
	}
	if g.format == "json" {
		type jsonPartition struct {
			client.PartitionProducers
			Error string `json:"error,omitempty"`
		}
		js := make([]jsonPartition, 0, len(ps))
		for _, p := range ps {
			jp := jsonPartition{PartitionProducers: p}
			if p.Err != nil {
				jp.Error = p.Err.Error()
			}
			if jp.Producers == nil {
				jp.Producers = []client.ProducerState{}
			}
			js = append(js, jp)
		}
		if err := printJSON(out, js); err != nil {
			return err
		}
	} else {
		rows := [][]string{}
		for _, p := range ps {
			for _, pr := range p.Producers {
				rows = append(rows, []string{fmt.Sprint(p.Partition), fmt.Sprint(p.Leader), fmt.Sprint(pr.ProducerID),
					fmt.Sprint(pr.ProducerEpoch), fmt.Sprint(pr.LastSequence),
					pr.LastTimestamp.UTC().Format("2006-01-02T15:04:05.000Z"), fmt.Sprint(pr.LastOffset)})
			}
		}
		if err := printTable(out, []string{"PARTITION", "LEADER", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "LAST-OFFSET"}, rows); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions of %s could not be described", failed, len(ps), topic)
	}
	return nil
}

// underReplicated is a partition with fewer in-sync replicas than
// replicas, or without a leader.
type underReplicated struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Status    string  `json:"status"`
}

// leaderUnreachable: the partition has a leader in the metadata, but the
// broker describing it could not get its offsets from that leader (all
// -1): it is down, cut off, or just lost the leadership.
func leaderUnreachable(p client.PartitionDescription) bool {
	return p.Leader >= 0 && p.HighWatermark < 0 && p.LogEndOffset < 0
}

// unreachableNote explains LEADER-UNREACHABLE where it is shown.
const unreachableNote = `note: an unreachable leader did not answer for its partitions' offsets. If it is down, the
controller fences it once broker.session.timeout.ms passes without a heartbeat, and moves its
partitions to in-sync followers; until then they cannot be written or read. The partitions it
follows (REPLICA-UNREACHABLE) leave it out of their ISR then.`

func printUnderReplicated(ctx context.Context, out, errOut io.Writer, g *globalFlags, cl *client.Client, names []string) error {
	ds, err := cl.DescribeTopics(ctx, names...)
	if err != nil {
		return err
	}
	found := []underReplicated{} // JSON: [] when all are in sync
	// The brokers that did not answer as a leader: until the controller
	// fences them they are still in the ISRs of the partitions they follow,
	// which are at risk too.
	down := map[int32]bool{}
	for _, d := range ds {
		for _, p := range d.Partitions {
			if leaderUnreachable(p) {
				down[p.Leader] = true
			}
		}
	}
	followerDown := func(p client.PartitionDescription) bool {
		for _, id := range p.ISR {
			if id != p.Leader && down[id] {
				return true
			}
		}
		return false
	}
	for _, d := range ds {
		for _, p := range d.Partitions {
			status := "UNDER-REPLICATED"
			switch {
			case p.Leader < 0:
				status = "OFFLINE"
			case leaderUnreachable(p):
				status = "LEADER-UNREACHABLE"
			case len(p.OfflineReplicas) > 0:
				status = "LOG-FAILED"
			case outOfSync(p):
			case followerDown(p):
				status = "REPLICA-UNREACHABLE"
			default:
				continue
			}
			found = append(found, underReplicated{d.Name, p.Partition, p.Leader, p.Replicas, p.ISR, status})
		}
	}
	if g.format == "json" {
		return printJSON(out, found)
	}
	if len(found) == 0 {
		return nil
	}
	rows := [][]string{}
	for _, u := range found {
		rows = append(rows, []string{u.Topic, fmt.Sprint(u.Partition), fmt.Sprint(u.Leader), int32s(u.Replicas), int32s(u.ISR), u.Status})
	}
	if err := printTable(out, []string{"TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "STATUS"}, rows); err != nil {
		return err
	}
	if len(down) > 0 {
		fmt.Fprintln(errOut, unreachableNote)
	}
	return nil
}

func topicDeleteCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics and their data",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			rows := [][]string{}
			failed := 0
			for _, name := range args {
				status := "OK"
				if err := cl.DeleteTopic(ctx, name); err != nil {
					status = err.Error()
					failed++
				}
				rows = append(rows, []string{name, status})
			}
			if g.format == "json" {
				type res struct {
					Topic  string `json:"topic"`
					Status string `json:"status"`
				}
				var out []res
				for _, r := range rows {
					out = append(out, res{r[0], r[1]})
				}
				if err := printJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else if err := printTable(cmd.OutOrStdout(), []string{"TOPIC", "STATUS"}, rows); err != nil {
				return err
			}
			return failedOf(failed, len(args), "deleted")
		},
	}
}

// failedOf is the exit error of a command whose table already printed
// each failure: a count, not the messages again.
func failedOf(failed, of int, verb string) error {
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d topics not %s (see the STATUS column)", failed, of, verb)
}

func topicAlterConfigCmd(g *globalFlags) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:   "alter-config NAME",
		Short: "Set (-c key=value) or reset (--delete key) topic configs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := parseKV(set)
			if err != nil {
				return err
			}
			if len(kv) == 0 && len(del) == 0 {
				return fmt.Errorf("nothing to change: give -c key=value or --delete key")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.AlterConfigs(ctx, args[0], kv, del...); err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]any{"topic": args[0], "set": kv, "deleted": del})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&set, "topic-config", "c", nil, "config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "config key to return to its default (repeatable)")
	return cmd
}

func topicAddPartitionsCmd(g *globalFlags) *cobra.Command {
	var n int32
	cmd := &cobra.Command{
		Use:   "add-partitions NAME",
		Short: "Add N partitions to a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return fmt.Errorf("-n must be at least 1")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			cur, err := cl.PartitionCount(ctx, args[0])
			if err != nil {
				return err
			}
			d, err := cl.CreatePartitions(ctx, args[0], cur+n)
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d -> %d partitions\n", args[0], cur, cur+n)
			return nil
		},
	}
	cmd.Flags().Int32VarP(&n, "num", "n", 0, "number of partitions to add")
	return cmd
}

// int32sOrDash is int32s, or "-" for none.
func int32sOrDash(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	return int32s(ids)
}

// outOfSync reports whether some replica of p is missing from its ISR,
// a replica that a reassignment is adding aside: it catches up as it
// should (quire partition reassign --status shows it), as Kafka counts.
func outOfSync(p client.PartitionDescription) bool {
	for _, r := range p.Replicas {
		if !slices.Contains(p.ISR, r) && !slices.Contains(p.AddingReplicas, r) {
			return true
		}
	}
	return false
}
