package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

func init() { registerCommand(newBrokerCmd) }

func newBrokerCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "broker", Short: "Cordon, uncordon, decommission and throttle brokers"}
	cmd.AddCommand(brokerCordonCmd(g, true), brokerCordonCmd(g, false), brokerDecommissionCmd(g), brokerThrottleCmd(g), brokerUnregisterCmd(g))
	return cmd
}

func brokerID(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("broker id %q: want a non-negative number", s)
	}
	return int32(n), nil
}

func brokerCordonCmd(g *globalFlags, cordon bool) *cobra.Command {
	use, short := "cordon ID", "Place no new replicas on a broker (those it has stay)"
	if !cordon {
		use, short = "uncordon ID", "Let new replicas be placed on a broker again"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := brokerID(args[0])
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.CordonBroker(ctx, id, cordon); err != nil {
				return fmt.Errorf("%s broker %d: %w", cmd.Name(), id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "broker %d %sed\n", id, cmd.Name())
			return nil
		},
	}
}

func brokerDecommissionCmd(g *globalFlags) *cobra.Command {
	var (
		noWait bool
		every  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "decommission ID [--no-wait]",
		Short: "Cordon a broker and move every replica it hosts to the others",
		Long: `Cordon the broker, then move each of its replicas to another live,
uncordoned broker (the one with the fewest replicas, on a rack the partition
has no replica on when there is one), and follow the moves until it hosts
no replica: its logs are deleted as each move completes. The broker stays
registered and cordoned; stop it, then remove it with quire broker
unregister once fenced. Refused, with nothing moved, when some partition has nowhere to go
(too few other brokers for its replication factor).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := brokerID(args[0])
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			if err := cl.CordonBroker(ctx, id, true); err != nil {
				return fmt.Errorf("cordon broker %d: %w", id, err)
			}
			fmt.Fprintf(out, "broker %d cordoned\n", id)
			brokers, parts, err := currentAssignment(ctx, cl, nil)
			if err != nil {
				return err
			}
			for i := range brokers {
				if brokers[i].ID == id {
					// Cordoned now, whether or not the node that answered
					// has applied it yet.
					brokers[i].Cordoned = true
				}
			}
			moves := metadata.PlanReassignment(brokers, parts, metadata.PlanOptions{})
			var stuck []string
			for _, p := range applyMoves(parts, moves) {
				for _, r := range p.Replicas {
					if r == id {
						stuck = append(stuck, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
					}
				}
			}
			if len(stuck) > 0 {
				return fmt.Errorf("broker %d: %d partitions have nowhere else to go (too few live, uncordoned brokers for their replication factor): %v; nothing moved, the broker stays cordoned", id, len(stuck), stuck)
			}
			plan := planOf(moves)
			if len(moves) > 0 {
				targets := make([]client.ReassignmentTarget, len(moves))
				for i, m := range moves {
					targets[i] = client.ReassignmentTarget{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas}
				}
				if err := cl.AlterPartitionReassignments(ctx, targets); err != nil {
					return fmt.Errorf("move the replicas of broker %d (none started): %w", id, err)
				}
			}
			fmt.Fprintf(out, "moving %d partition replicas off broker %d\n", len(moves), id)
			if noWait {
				return nil
			}
			if len(moves) > 0 {
				if err := waitReassignments(ctx, cl, out, &plan, every); err != nil {
					return err
				}
			}
			return waitEmpty(ctx, cl, out, id, every)
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the moves and return (follow them with quire partition reassign --status)")
	cmd.Flags().DurationVar(&every, "poll-interval", time.Second, "how often to look at the moves")
	return cmd
}

func applyMoves(parts, moves []metadata.PlanPartition) []metadata.PlanPartition {
	out := make([]metadata.PlanPartition, len(parts))
	copy(out, parts)
	for _, m := range moves {
		for i := range out {
			if out[i].Topic == m.Topic && out[i].Partition == m.Partition {
				out[i] = m
			}
		}
	}
	return out
}

// waitEmpty waits until the cluster says broker id hosts no replica.
func waitEmpty(ctx context.Context, cl *client.Client, out io.Writer, id int32, every time.Duration) error {
	for {
		d, err := cl.DescribeCluster(ctx)
		if err != nil {
			return fmt.Errorf("describe the cluster: %w", err)
		}
		left := int32(-1)
		for _, b := range d.Brokers {
			if b.ID == id {
				left = b.Partitions
			}
		}
		if left <= 0 {
			fmt.Fprintf(out, "broker %d hosts no replica: decommissioned (still cordoned and registered)\n", id)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %d still hosts %d replicas: %w", id, left, ctx.Err())
		case <-time.After(every):
		}
	}
}

func brokerThrottleCmd(g *globalFlags) *cobra.Command {
	var (
		brokers []int32
		unset   bool
	)
	cmd := &cobra.Command{
		Use:   "throttle BYTES_PER_SECOND [--broker N]... | --unset [--broker N]...",
		Short: "Set replica.reassignment.throttle.bytes.per.second at run time",
		Long: `Set replica.reassignment.throttle.bytes.per.second on the brokers named
(every broker by default): the bytes a second the replicas a broker is
adding by reassignment fetch, together; 0 is unthrottled. Normal
replication is never throttled. The value is kept in the metadata log and
outlives restarts; --unset goes back to each broker's configuration.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rate int64
			switch {
			case unset && len(args) == 0:
			case !unset && len(args) == 1:
				n, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("throttle %q: want a number of bytes a second, 0 or more", args[0])
				}
				rate = n
			default:
				return fmt.Errorf("give BYTES_PER_SECOND or --unset")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.SetReassignmentThrottle(ctx, rate, unset, brokers...); err != nil {
				return fmt.Errorf("set the reassignment throttle: %w", err)
			}
			who := "every broker"
			if len(brokers) > 0 {
				who = fmt.Sprintf("brokers %s", ids(brokers))
			}
			if unset {
				fmt.Fprintf(cmd.OutOrStdout(), "reassignment throttle of %s back to its configuration\n", who)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "reassignment throttle of %s set to %d bytes/s\n", who, rate)
			}
			return nil
		},
	}
	cmd.Flags().Int32SliceVar(&brokers, "broker", nil, "a broker to set it on (repeatable); default every broker")
	cmd.Flags().BoolVar(&unset, "unset", false, "go back to each broker's configured value")
	return cmd
}

func brokerUnregisterCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "unregister ID",
		Short: "Remove a stopped, fenced broker-only node for good",
		Long: `Remove a broker gone for good from the metadata quorum, the broker list
and every ISR (Kafka's kafka-cluster.sh unregister). Refused for a
controller (quorum voter) and for a broker that is unfenced or was heard
from within broker.session.timeout.ms: stop it first. Its partitions keep
it in their replica lists; move them off first (quire broker decommission).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := brokerID(args[0])
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.UnregisterBroker(ctx, id); err != nil {
				return fmt.Errorf("unregister broker %d: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "broker %d unregistered\n", id)
			return nil
		},
	}
}
