package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newFeaturesCmd(g *globalFlags) *cobra.Command {
	var upgrade int32
	cmd := &cobra.Command{
		Use:   "features",
		Short: "Show the finalized metadata.version and each broker's supported range, or raise it",
		Long: `Show the cluster's finalized metadata.version feature level (the metadata
command set every node applies) and the range of levels each registered
broker supports. The controller raises the level by itself once every
registered broker supports a higher one; --upgrade N raises it to N now,
and is refused (FEATURE_UPDATE_FAILED) while a broker does not support N:
the message names them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			if cmd.Flags().Changed("upgrade") {
				level, err := cl.UpdateFeatures(ctx, upgrade)
				if err != nil {
					return fmt.Errorf("upgrade metadata.version to %d: %w", upgrade, err)
				}
				if g.format != "json" {
					fmt.Fprintf(out, "metadata.version finalized at %d\n\n", level)
				}
			}
			f, err := cl.DescribeFeatures(ctx)
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(out, f)
			}
			fmt.Fprintf(out, "METADATA.VERSION  %d\n\n", f.MetadataVersion)
			rows := [][]string{}
			for _, b := range f.Brokers {
				rows = append(rows, []string{fmt.Sprint(b.ID), fmt.Sprint(b.MinMetadataVersion), fmt.Sprint(b.MaxMetadataVersion), yesNo(b.Fenced)})
			}
			return printTable(out, []string{"BROKER", "MIN", "MAX", "FENCED"}, rows)
		},
	}
	cmd.Flags().Int32Var(&upgrade, "upgrade", 0, "finalize metadata.version at this level")
	return cmd
}
