package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func topicDeleteRecordsCmd(g *globalFlags) *cobra.Command {
	var before string
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "delete-records TOPIC --before OFFSET|hw",
		Short: "Delete a topic's records below an offset",
		Long: `delete-records deletes the records of a topic's partitions (all of them,
or those given with --partition) below --before, an offset or "hw" for
the high watermark (everything consumers can read now). As Kafka's
kafka-delete-records.sh: each partition's log start offset moves up to
it, consumers positioned below it reset by their policy, and its segments
wholly below it leave the disk; the leader answers once every in-sync
replica has the new start. Records above the high watermark cannot be
deleted. It prints each partition's new log start (its low watermark) and
fails if any partition was not done.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			offset := client.DeleteBelowHighWatermark
			switch {
			case before == "":
				return fmt.Errorf("--before is required: an offset, or hw for the high watermark")
			case before != "hw":
				n, err := strconv.ParseInt(before, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("--before %q: want an offset (0 or more) or hw", before)
				}
				offset = n
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if len(partitions) == 0 {
				n, err := cl.PartitionCount(ctx, topic)
				if err != nil {
					return err
				}
				for p := range n {
					partitions = append(partitions, p)
				}
			}
			want := make(map[int32]int64, len(partitions))
			for _, p := range partitions {
				want[p] = offset
			}
			res, err := cl.DeleteRecords(ctx, topic, want)
			if err != nil {
				return err
			}
			failed := 0
			rows := [][]string{}
			type jsonResult struct {
				client.DeletedRecords
				Error string `json:"error,omitempty"`
			}
			js := make([]jsonResult, 0, len(res))
			for _, r := range res {
				status, low := "OK", fmt.Sprint(r.LowWatermark)
				if r.Err != nil {
					failed++
					status, low = r.Err.Error(), "-"
				}
				rows = append(rows, []string{fmt.Sprint(r.Partition), low, status})
				jr := jsonResult{DeletedRecords: r}
				if r.Err != nil {
					jr.Error = r.Err.Error()
				}
				js = append(js, jr)
			}
			if g.format == "json" {
				err = printJSON(cmd.OutOrStdout(), js)
			} else {
				err = printTable(cmd.OutOrStdout(), []string{"PARTITION", "LOW-WATERMARK", "STATUS"}, rows)
			}
			if err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d partitions of %s not done (see the STATUS column)", failed, len(res), topic)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&before, "before", "", `delete the records below this offset, or "hw" for the high watermark`)
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "only these partitions (repeat or comma-separate; default all)")
	return cmd
}
