package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newTxCmd) }

// newTxCmd is quire tx: the transaction coordinator's view of
// transactional ids, and an operator's abort.
func newTxCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tx",
		Short: "List, describe and abort transactions",
		Long: `Transactions as the transaction coordinator (on the controller) holds them:
each transactional id's producer id and epoch, its state (Empty, Ongoing,
PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), and the
partitions and consumer groups of its ongoing transaction.`,
	}
	cmd.AddCommand(txListCmd(g), txDescribeCmd(g), txAbortCmd(g))
	return cmd
}

func printTxns(cmd *cobra.Command, g *globalFlags, txns []client.TransactionDescription) error {
	if g.format == "json" {
		if txns == nil {
			txns = []client.TransactionDescription{}
		}
		return printJSON(cmd.OutOrStdout(), txns)
	}
	w := cmd.OutOrStdout()
	for _, t := range txns {
		fmt.Fprintf(w, "%s\tproducer %d epoch %d\t%s\ttimeout %dms", t.ID, t.ProducerID, t.ProducerEpoch, t.State, t.TimeoutMs)
		if !t.StartTime.IsZero() {
			fmt.Fprintf(w, "\tstarted %s", t.StartTime.UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		var parts []string
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "\tpartitions %s", strings.Join(parts, ","))
		}
		if len(t.Groups) > 0 {
			fmt.Fprintf(w, "\tgroups %s", strings.Join(t.Groups, ","))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func txListCmd(g *globalFlags) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:   "list [--state STATE]...",
		Short: "List transactional ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			txns, err := cl.ListTransactions(ctx, states...)
			if err != nil {
				return fmt.Errorf("list transactions: %w", err)
			}
			return printTxns(cmd, g, txns)
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	return cmd
}

func txDescribeCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe ID...",
		Short: "Describe transactional ids",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			txns, err := cl.DescribeTransactions(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe transactions: %w", err)
			}
			return printTxns(cmd, g, txns)
		},
	}
}

func txAbortCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "abort ID",
		Short: "Abort a transactional id's ongoing transaction and fence its producer",
		Long: `Abort the ongoing transaction of a transactional id, if it has one, and fence
its producer (its epoch is bumped, as a new producer with the id would):
the way out of a transaction whose producer is gone, short of waiting for
its timeout. The producer's next call fails PRODUCER_FENCED.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			t, err := cl.AbortTransaction(ctx, args[0])
			if err != nil {
				return fmt.Errorf("abort transaction %s: %w", args[0], err)
			}
			return printTxns(cmd, g, []client.TransactionDescription{t})
		},
	}
}
