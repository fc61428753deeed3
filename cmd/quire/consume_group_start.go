package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quirelog/quire/client"
)

// Where consume --group starts: at the offset the group committed, and
// where it committed none at -o when given, else where --reset says
// (Kafka's auto.offset.reset: earliest, latest, or none, which refuses
// to guess), else at the log start. Each run says on standard error
// where each partition starts and why, as -o end and @TIMESTAMP do
// without a group.

// groupFallback is where consume --group starts a partition its group
// committed no offset for, and the words that say why.
func groupFallback(start client.Offset, offsetGiven bool, offsetFlag, reset string) (client.Offset, string) {
	switch {
	case offsetGiven:
		return start, "-o " + offsetFlag
	case reset == "earliest":
		return client.AtStart(), "--reset earliest: the log start"
	case reset == "latest":
		return client.AtEnd(), "--reset latest: the log end, waiting for new records"
	case reset == "none":
		return client.NoReset(), "--reset none"
	}
	return client.AtStart(), "the log start (--reset earliest, the default)"
}

// errNoCommit is consume --group with --reset none reaching a partition
// the group never committed in.
func errNoCommit(group, topic string, parts []int32) error {
	return fmt.Errorf("group %s has no committed offset for %s partition %s and --reset is none: "+
		"commit one (quire group reset-offsets) or pass --reset earliest or latest", group, topic, joinInts(parts))
}

func joinInts(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// groupStarts finds where each of parts of topic starts for group: the
// committed offset, else fallback (exact offsets for start, end and
// @TIMESTAMP, as listed now). none lists the partitions without a commit
// when fallback is NoReset; they are absent from at.
func groupStarts(ctx context.Context, cl *client.Client, group, topic string, parts []int32, fallback client.Offset) (
	at map[int32]int64, committed map[int32]bool, none []int32, err error) {
	tps := make([]client.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = client.TopicPartition{Topic: topic, Partition: p}
	}
	offs, err := cl.FetchOffsets(ctx, group, tps...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("group %s: read its committed offsets of %s: %w", group, topic, err)
	}
	at, committed = map[int32]int64{}, map[int32]bool{}
	for _, o := range offs {
		if o.Topic == topic && o.Offset >= 0 && slices.Contains(parts, o.Partition) {
			at[o.Partition], committed[o.Partition] = o.Offset, true
		}
	}
	var rest []int32
	for _, p := range parts {
		if !committed[p] {
			rest = append(rest, p)
		}
	}
	if len(rest) == 0 {
		return at, committed, nil, nil
	}
	if fallback == client.NoReset() {
		return at, committed, rest, nil
	}
	found, err := cl.ListOffsets(ctx, topic, fallback, rest...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("topic %s: find where -o or --reset starts: %w", topic, err)
	}
	var after []int32
	for _, p := range rest {
		if found[p] < 0 {
			after = append(after, p) // no record at or after the time
		}
		at[p] = found[p]
	}
	if len(after) > 0 {
		ends, err := cl.ListOffsets(ctx, topic, client.AtEnd(), after...)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("topic %s: find the end of each partition: %w", topic, err)
		}
		for _, p := range after {
			at[p] = ends[p]
		}
	}
	return at, committed, nil, nil
}

// sayGroupStarts writes where each partition starts: those with a
// committed offset on one line, the others on another with why.
func sayGroupStarts(w io.Writer, group, topic string, parts []int32, at map[int32]int64, committed map[int32]bool, why string) {
	var withCommit, without []int32
	for _, p := range parts {
		if _, ok := at[p]; !ok {
			continue
		}
		if committed[p] {
			withCommit = append(withCommit, p)
		} else {
			without = append(without, p)
		}
	}
	if len(withCommit) > 0 {
		fmt.Fprintf(w, "group %s: starting %s at %s (partition:offset; the group's committed offsets)\n", group, topic, positions(withCommit, at))
	}
	if len(without) > 0 {
		fmt.Fprintf(w, "group %s: starting %s at %s (partition:offset; no committed offset, so %s)\n", group, topic, positions(without, at), why)
	}
}

// resolveGroupStarts sets each partition of assign (consume --group -p)
// to where it starts for group, and says where; with --reset none a
// partition the group never committed in is an error.
func resolveGroupStarts(ctx context.Context, cl *client.Client, group, topic string, assign map[int32]client.Offset,
	fallback client.Offset, why string, errOut io.Writer) error {
	parts := make([]int32, 0, len(assign))
	for p := range assign {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	at, committed, none, err := groupStarts(ctx, cl, group, topic, parts, fallback)
	if err != nil {
		return err
	}
	if len(none) > 0 {
		return errNoCommit(group, topic, none)
	}
	for _, p := range parts {
		assign[p] = client.At(at[p])
	}
	sayGroupStarts(errOut, group, topic, parts, at, committed, why)
	return nil
}
