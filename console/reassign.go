package console

import (
	"net/http"

	"github.com/quirelog/quire/client"
)

// The moves page: the partitions being reassigned, with the bytes each
// new replica has still to fetch from the leader.

type moveRow struct {
	Topic                           string
	Partition                       int32
	Leader                          int32
	Replicas, Adding, Removing, ISR []int32
	// LeaderSize is the leader's log on disk ("–": not known).
	LeaderSize string
	// Progress is one entry for each adding replica.
	Progress []addingRow
	// Left sums the bytes left over the adding replicas, -1 when one of
	// them is not known (for sorting and the page's total).
	Left int64
}

type addingRow struct {
	Broker int32
	// Has is the replica's log on disk; Left the bytes it has still to
	// fetch ("–": not known); InSync: it has joined the ISR.
	Has, Left string
	InSync    bool
}

type movesView struct {
	Rows []moveRow
	// Left is every adding replica's bytes left, together; Unknown counts
	// the replicas whose figure is not known (left out of it).
	Left    string
	Unknown int
}

func (c *Console) movesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	p := page{Title: "Moves", Nav: "moves", Refresh: c.refresh()}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "moves", p, err)
		return
	}
	code := http.StatusOK
	pending, err := cl.ListPartitionReassignments(ctx, "")
	if unreachable(err) {
		c.renderUnreachable(w, r, "moves", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, errText(err))
		code = httpCode(err)
	}
	mv := movesOf(pending)
	p.Data = mv
	if code == http.StatusOK {
		c.remember(r.URL.Path, mv)
	}
	c.render(w, code, "moves", p)
}

// movesOf is the page's view of the pending reassignments, in the order
// the cluster answers them (by topic and partition).
func movesOf(pending []client.Reassignment) movesView {
	var mv movesView
	var total int64
	for _, re := range pending {
		row := moveRow{Topic: re.Topic, Partition: re.Partition, Leader: re.Leader, Replicas: re.Replicas,
			Adding: re.AddingReplicas, Removing: re.RemovingReplicas, ISR: re.ISR, LeaderSize: sizeOrDash(re.LeaderSizeBytes)}
		for _, id := range re.AddingReplicas {
			a := client.AddingReplica{BrokerID: id, LogEndOffset: -1, SizeBytes: -1, BytesLeft: -1}
			for _, x := range re.Adding {
				if x.BrokerID == id {
					a = x
				}
			}
			inSync := false
			for _, isr := range re.ISR {
				inSync = inSync || isr == id
			}
			row.Progress = append(row.Progress, addingRow{Broker: id, Has: sizeOrDash(a.SizeBytes), Left: sizeOrDash(a.BytesLeft), InSync: inSync})
			if a.BytesLeft < 0 {
				mv.Unknown++
				row.Left = -1
			} else {
				total += a.BytesLeft
				if row.Left >= 0 {
					row.Left += a.BytesLeft
				}
			}
		}
		mv.Rows = append(mv.Rows, row)
	}
	mv.Left = byteSize(float64(total))
	return mv
}

// sizeOrDash is a number of bytes, "–" when negative (not known).
func sizeOrDash(v int64) string {
	if v < 0 {
		return "–"
	}
	return byteSize(float64(v))
}
