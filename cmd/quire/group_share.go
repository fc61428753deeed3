package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quirelog/quire/client"
)

// printShareGroup is group describe for a share group: a line about the
// group, then a line per partition (or, with --members, per member).
func printShareGroup(out io.Writer, g *globalFlags, d client.ShareGroupDescription, members bool) error {
	if g.format == "json" {
		return printJSON(out, d)
	}
	ordering := "off"
	if d.KeyOrdered {
		ordering = "on"
	}
	fmt.Fprintf(out, "share group %s (served by broker %d): %d members, key ordering %s, dead-letter topic %s\n\n",
		d.Group, d.Broker, len(d.Members), ordering, cmp.Or(d.DeadLetterTopic, "-"))
	if members {
		rows := [][]string{}
		for _, m := range d.Members {
			rows = append(rows, []string{d.Group, m.MemberID, fmt.Sprint(m.MemberEpoch), fmt.Sprint(m.InFlight), strings.Join(m.Topics, ",")})
		}
		return printTable(out, []string{"GROUP", "MEMBER", "EPOCH", "IN-FLIGHT", "TOPICS"}, rows)
	}
	rows := [][]string{}
	for _, p := range d.Partitions {
		oldest := "-"
		if l := p.OldestLock; l.Offset >= 0 {
			oldest = fmt.Sprintf("%d (%s, expires in %s, delivery %d)", l.Offset, cmp.Or(l.Member, "-"),
				max(time.Until(l.Expires), 0).Round(time.Second), l.DeliveryCount)
		}
		end := "-" // not held by the node answering: its saved start only
		if p.EndOffset >= 0 {
			end = fmt.Sprint(p.EndOffset)
		}
		rows = append(rows, []string{d.Group, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.StartOffset), end,
			fmt.Sprint(p.InFlight), fmt.Sprint(p.Available), oldest, fmt.Sprint(p.DeadLettered)})
	}
	return printTable(out, []string{"GROUP", "TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "IN-FLIGHT", "AVAILABLE", "OLDEST-LOCK", "DEAD-LETTERED"}, rows)
}
