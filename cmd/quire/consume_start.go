package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/quirelog/quire/client"
)

// resolveStarts turns the starts of assign that would otherwise leave the
// user waiting without a word into exact offsets, and says on errOut
// where each partition starts: -o end and -o @TIMESTAMP (past the last
// record, that is the end too), and an exact -o OFFSET outside a
// partition's log when --reset earliest or latest moves it. reset is the
// --reset policy in force ("earliest", "latest" or "none"). Other starts
// are left to the consumer.
func resolveStarts(ctx context.Context, cl *client.Client, topic string, assign map[int32]client.Offset,
	start client.Offset, offsetFlag, reset string, errOut io.Writer) error {
	parts := make([]int32, 0, len(assign))
	for p := range assign {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var why string
	var at map[int32]int64
	switch s := start.String(); {
	case s == "end":
		ends, err := cl.ListOffsets(ctx, topic, start, parts...)
		if err != nil {
			return fmt.Errorf("topic %s: find the end of each partition: %w", topic, err)
		}
		at, why = ends, fmt.Sprintf("-o %s: the end, waiting for new records", offsetFlag)
	case strings.HasPrefix(s, "@"):
		offs, err := cl.ListOffsets(ctx, topic, start, parts...)
		if err != nil {
			return fmt.Errorf("topic %s: find the offsets of -o %s: %w", topic, offsetFlag, err)
		}
		var none []int32
		for _, p := range parts {
			if offs[p] < 0 {
				none = append(none, p)
			}
		}
		if len(none) > 0 {
			// No record at or after the time: the partition starts at its
			// end, as the consumer would.
			ends, err := cl.ListOffsets(ctx, topic, client.AtEnd(), none...)
			if err != nil {
				return fmt.Errorf("topic %s: find the end of each partition: %w", topic, err)
			}
			for _, p := range none {
				offs[p] = ends[p]
			}
		}
		at, why = offs, fmt.Sprintf("-o %s: the first record at or after the time, else the end", offsetFlag)
		if len(none) == len(parts) {
			why = fmt.Sprintf("-o %s: no record at or after the time, so the end, waiting for new records", offsetFlag)
		}
	case start.Exact() && reset != "none":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil
		}
		return resetOutOfRange(ctx, cl, topic, assign, parts, n, reset, errOut)
	default:
		return nil
	}
	for _, p := range parts {
		assign[p] = client.At(at[p])
	}
	fmt.Fprintf(errOut, "starting %s at %s (partition:offset; %s)\n", topic, positions(parts, at), why)
	return nil
}

// resetOutOfRange moves an exact start n outside a partition's log to
// where --reset says, and says so, so that the user knows where reading
// began.
func resetOutOfRange(ctx context.Context, cl *client.Client, topic string, assign map[int32]client.Offset,
	parts []int32, n int64, reset string, errOut io.Writer) error {
	lows, err := cl.ListOffsets(ctx, topic, client.AtStart(), parts...)
	if err != nil {
		return fmt.Errorf("topic %s: find the start of each partition: %w", topic, err)
	}
	highs, err := cl.ListOffsets(ctx, topic, client.AtEnd(), parts...)
	if err != nil {
		return fmt.Errorf("topic %s: find the end of each partition: %w", topic, err)
	}
	for _, p := range parts {
		if n >= lows[p] && n <= highs[p] {
			continue // in range (the end included: the next record)
		}
		to := lows[p]
		if reset == "latest" {
			to = highs[p]
		}
		assign[p] = client.At(to)
		fmt.Fprintf(errOut, "partition %d of %s: offset %d is out of range (valid offsets are %d to %d, log end %d); starting at %d (--reset %s)\n",
			p, topic, n, lows[p], highs[p]-1, highs[p], to, reset)
	}
	return nil
}

// positions is "0:5, 1:3": each partition and its offset.
func positions(parts []int32, at map[int32]int64) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = fmt.Sprintf("%d:%d", p, at[p])
	}
	return strings.Join(s, ", ")
}

// resetPolicy is the --reset in force for start: as given, else none for
// an exact offset and earliest for the others (parseReset's defaults).
func resetPolicy(given string, start client.Offset) string {
	switch {
	case given != "":
		return given
	case start.Exact():
		return "none"
	}
	return "earliest"
}
