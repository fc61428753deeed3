package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// The message browser reads a page of a topic's records with bounded
// fetches: at most browseWindow records of each partition shown are
// scanned per page view (fewer when the page fills), never the whole
// topic. A page covers, in each partition, a range of offsets [lo, hi):
// every record in it that matches the filter is on the page, so "older"
// goes on below lo and "newer" above hi, partition by partition.

const (
	// browseWindow is how many records of each partition a page view
	// scans at most.
	browseWindow = 500
	// browseMaxLimit bounds the records shown on a page.
	browseMaxLimit = 200
	// browseRounds bounds the fetches per page view: a partition whose
	// records are large comes in several.
	browseRounds = 6
	// browsePartitionBytes bounds each partition's part of a fetch.
	browsePartitionBytes = 1 << 20
)

// browseQuery is what the browser is asked to show.
type browseQuery struct {
	Partition  int32  // -1: all
	From       string // newest (default), oldest, offset, timestamp
	Offset     int64
	Timestamp  string // as typed: RFC 3339, "2006-01-02 15:04:05" (UTC) or ms since the epoch
	Key        string // exact key
	Header     string // name or name=value
	Value      string // substring of the value
	Limit      int
	Dir        string    // "older" or "newer": a page from Pos
	Pos        positions // where a paged view goes on from
	timestampT time.Time
}

func (q browseQuery) Filtered() bool { return q.Key != "" || q.Header != "" || q.Value != "" }

// parseBrowseQuery reads the browser's URL query; errors are in words.
func parseBrowseQuery(v url.Values) (browseQuery, error) {
	q := browseQuery{Partition: -1, From: v.Get("from"), Key: v.Get("key"), Header: v.Get("header"),
		Value: v.Get("value"), Timestamp: strings.TrimSpace(v.Get("ts")), Dir: v.Get("dir"), Limit: 50}
	if s := v.Get("partition"); s != "" && s != "all" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return q, fmt.Errorf("partition %q is not a partition number (or all)", s)
		}
		q.Partition = int32(n)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > browseMaxLimit {
			return q, fmt.Errorf("limit %q: give a number from 1 to %d", s, browseMaxLimit)
		}
		q.Limit = n
	}
	switch q.From {
	case "":
		q.From = "newest"
	case "newest", "oldest":
	case "offset":
		n, err := strconv.ParseInt(v.Get("offset"), 10, 64)
		if err != nil || n < 0 {
			return q, fmt.Errorf("offset %q is not a non-negative number", v.Get("offset"))
		}
		q.Offset = n
	case "timestamp":
		t, err := parseTimestamp(q.Timestamp)
		if err != nil {
			return q, err
		}
		q.timestampT = t
	default:
		return q, fmt.Errorf("from=%q: want newest, oldest, offset or timestamp", q.From)
	}
	switch q.Dir {
	case "":
	case "older", "newer":
		ps, ok := parsePositions(v.Get("pos"))
		if !ok {
			return q, fmt.Errorf("pos %q: want partition:offset,…", v.Get("pos"))
		}
		q.Pos = ps
	default:
		return q, fmt.Errorf("dir=%q: want older or newer", q.Dir)
	}
	return q, nil
}

// parseTimestamp reads a time as an operator types it: RFC 3339, a date
// and time in UTC ("2006-01-02 15:04:05", seconds optional, "T" allowed),
// or milliseconds since the epoch.
func parseTimestamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("a timestamp is required to start at one")
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.000", "2006-01-02 15:04:05", "2006-01-02T15:04:05",
		"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %q: give RFC 3339 (2006-01-02T15:04:05Z), a UTC date and time (2006-01-02 15:04:05) or milliseconds since the epoch", s)
}

// match reports whether r passes the query's filters.
func (q browseQuery) match(r *quirev1.ConsumedRecord) bool {
	if q.Key != "" && (r.GetKeyData() == nil || string(r.GetKeyBytes()) != q.Key) {
		return false
	}
	if q.Header != "" {
		name, value, withValue := strings.Cut(q.Header, "=")
		found := false
		for _, h := range r.GetHeaders() {
			if h.GetKey() == name && (!withValue || string(h.GetValue()) == value) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if q.Value != "" && !bytes.Contains(r.GetValueBytes(), []byte(q.Value)) {
		return false
	}
	return true
}

// browseRow is one record on the browser's page.
type browseRow struct {
	tailRecord
	Size int // key, value and headers in bytes
}

// partitionRange is what a page covered of one partition.
type partitionRange struct {
	Partition             int32
	Lo, Hi                int64 // every matching record in [Lo, Hi) is on the page
	LogStart, HighWater   int64
	Scanned, Matched, Err string
}

type browseView struct {
	Topic      string
	Partitions int32
	Query      browseQuery
	PartSel    string // the partition select's value: "all" or a number
	Rows       []browseRow
	Ranges     []partitionRange
	Scanned    int // records read for this page
	Older      string
	Newer      string
	// Descending: newest first (reading back from the end).
	Descending bool
	// Exhausted: no older (descending) or newer (ascending) records to
	// read now.
	AtStart, AtEnd bool
}

// readRange reads records of topic in each partition p from from[p] up to
// (not including) until[p], at most max records each, with bounded
// fetches; a partition's error is in errs. The records come back per
// partition in offset order.
func (c *Console) readRange(ctx context.Context, topic string, from, until map[int32]int64, max int) (recs map[int32][]*quirev1.ConsumedRecord, reached map[int32]int64, errs map[int32]error) {
	out := map[int32][]*quirev1.ConsumedRecord{}
	errs = map[int32]error{}
	reached = map[int32]int64{}
	next := map[int32]int64{}
	for p, off := range from {
		reached[p] = off
		if off < until[p] {
			next[p] = off
		}
	}
	for round := 0; round < browseRounds && len(next) > 0; round++ {
		req := &quirev1.FetchRecordsMultiRequest{MaxRecords: int32(min(max*len(next), 10000)), Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}
		for p, off := range next {
			req.Partitions = append(req.Partitions, &quirev1.FetchRecordsPartition{Topic: topic, Partition: p, Offset: off, MaxBytes: browsePartitionBytes})
		}
		sort.Slice(req.Partitions, func(i, j int) bool { return req.Partitions[i].Partition < req.Partitions[j].Partition })
		res, err := c.fetchRecords(ctx, req)
		if err != nil {
			for p := range next {
				errs[p] = err
			}
			break
		}
		for _, pr := range res.GetPartitions() {
			p := pr.GetPartition()
			if _, ok := next[p]; !ok {
				continue
			}
			if e := pr.GetError(); e != nil && e.GetCode() != quirev1.ErrorCode_NONE {
				errs[p] = &client.Error{Code: e.GetCode(), Message: e.GetMessage()}
				delete(next, p)
				continue
			}
			progressed := false
			for _, r := range pr.GetRecords() {
				if r.GetOffset() < next[p] || r.GetOffset() >= until[p] || len(out[p]) >= max {
					continue
				}
				out[p] = append(out[p], r)
				next[p] = r.GetOffset() + 1
				progressed = true
			}
			if n := pr.GetNextOffset(); n > next[p] && len(out[p]) < max {
				next[p] = min(n, until[p])
				progressed = true
			}
			reached[p] = next[p]
			if !progressed || next[p] >= until[p] || len(out[p]) >= max {
				delete(next, p)
			}
		}
	}
	return out, reached, errs
}

// browse reads one page for q.
func (c *Console) browse(ctx context.Context, cl *client.Client, topic string, q browseQuery) (browseView, error) {
	bv := browseView{Topic: topic, Query: q, PartSel: "all"}
	n, err := cl.PartitionCount(ctx, topic)
	if err != nil {
		return bv, err
	}
	bv.Partitions = n
	var parts []int32
	if q.Partition >= 0 {
		if q.Partition >= n {
			return bv, &client.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("topic %s has %d partitions: no partition %d", topic, n, q.Partition)}
		}
		parts = []int32{q.Partition}
		bv.PartSel = fmt.Sprint(q.Partition)
	}
	starts, err := cl.ListOffsets(ctx, topic, client.AtStart(), parts...)
	if err != nil {
		return bv, err
	}
	ends, err := cl.ListOffsets(ctx, topic, client.AtEnd(), parts...)
	if err != nil {
		return bv, err
	}
	// Where the page starts in each partition, and which way it reads.
	pos := map[int32]int64{}
	descending := false
	switch {
	case q.Dir == "older":
		descending = true
		for p, off := range q.Pos {
			if _, ok := ends[p]; ok {
				pos[p] = min(off, ends[p])
			}
		}
	case q.Dir == "newer":
		for p, off := range q.Pos {
			if _, ok := ends[p]; ok {
				pos[p] = max(off, starts[p])
			}
		}
	case q.From == "newest":
		descending = true
		pos = ends
	case q.From == "oldest":
		pos = starts
	case q.From == "offset":
		for p := range ends {
			pos[p] = max(q.Offset, starts[p])
		}
	case q.From == "timestamp":
		at, err := cl.ListOffsets(ctx, topic, client.AtTimestamp(q.timestampT), parts...)
		if err != nil {
			return bv, err
		}
		for p, off := range at {
			if off < 0 {
				off = ends[p] // no record at or after it
			}
			pos[p] = off
		}
	}
	bv.Descending = descending
	from, until := map[int32]int64{}, map[int32]int64{}
	for p, off := range pos {
		if descending {
			from[p], until[p] = max(starts[p], off-browseWindow), off
		} else {
			from[p], until[p] = off, min(ends[p], off+browseWindow)
		}
	}
	recs, reached, errs := c.readRange(ctx, topic, from, until, browseWindow)
	// Each partition covers [lo, hi): what was read, or nothing after an
	// error. A descending read that stopped short of pos (large records)
	// covers what it read, and "newer" goes on from there.
	lo, hi := map[int32]int64{}, map[int32]int64{}
	var cands []*quirev1.ConsumedRecord
	for p := range pos {
		if errs[p] != nil {
			lo[p], hi[p] = pos[p], pos[p]
			continue
		}
		lo[p], hi[p] = from[p], reached[p]
		bv.Scanned += len(recs[p])
		for _, r := range recs[p] {
			if q.match(r) {
				cands = append(cands, r)
			}
		}
	}
	less := func(a, b *quirev1.ConsumedRecord) bool {
		if a.GetTimestampMs() != b.GetTimestampMs() {
			return a.GetTimestampMs() < b.GetTimestampMs()
		}
		if a.GetPartition() != b.GetPartition() {
			return a.GetPartition() < b.GetPartition()
		}
		return a.GetOffset() < b.GetOffset()
	}
	sort.Slice(cands, func(i, j int) bool {
		if descending {
			return less(cands[j], cands[i])
		}
		return less(cands[i], cands[j])
	})
	taken, dropped := cands, []*quirev1.ConsumedRecord(nil)
	if len(cands) > q.Limit {
		taken, dropped = cands[:q.Limit], cands[q.Limit:]
	}
	// A partition whose matches did not all fit covers only up to the
	// first it left out.
	for _, r := range dropped {
		p, o := r.GetPartition(), r.GetOffset()
		if descending {
			lo[p] = max(lo[p], o+1)
		} else {
			hi[p] = min(hi[p], o)
		}
	}
	for _, r := range taken {
		p, o := r.GetPartition(), r.GetOffset()
		if o < lo[p] || o >= hi[p] {
			continue // shown on the next page instead
		}
		bv.Rows = append(bv.Rows, browseRow{tailRecord: tailRecordOf(r), Size: recordSize(r)})
	}
	older, newer := positions{}, positions{}
	bv.AtStart, bv.AtEnd = true, true
	keys := make([]int32, 0, len(pos))
	for p := range pos {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, p := range keys {
		pr := partitionRange{Partition: p, LogStart: starts[p], HighWater: ends[p]}
		pr.Lo, pr.Hi = lo[p], hi[p]
		if errs[p] != nil {
			pr.Err = errText(errs[p])
		}
		older[p], newer[p] = pr.Lo, pr.Hi
		if pr.Lo > starts[p] {
			bv.AtStart = false
		}
		if pr.Hi < ends[p] {
			bv.AtEnd = false
		}
		bv.Ranges = append(bv.Ranges, pr)
	}
	base := url.Values{}
	for k, v := range map[string]string{"partition": bv.PartSel, "key": q.Key, "header": q.Header, "value": q.Value} {
		if v != "" && v != "all" {
			base.Set(k, v)
		}
	}
	if q.Limit != 50 {
		base.Set("limit", fmt.Sprint(q.Limit))
	}
	link := func(dir string, ps positions) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		v.Set("dir", dir)
		v.Set("pos", ps.String())
		return "/topics/" + url.PathEscape(topic) + "/messages?" + v.Encode()
	}
	if len(keys) > 0 {
		bv.Older, bv.Newer = link("older", older), link("newer", newer)
	}
	return bv, nil
}

// recordSize is a record's key, value and headers in bytes.
func recordSize(r *quirev1.ConsumedRecord) int {
	n := len(r.GetKeyBytes()) + len(r.GetValueBytes())
	for _, h := range r.GetHeaders() {
		n += len(h.GetKey()) + len(h.GetValue())
	}
	return n
}

func (c *Console) messagesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	topic := r.PathValue("topic")
	p := page{Title: "Messages of " + topic, Nav: "topics", Refresh: -1, Notice: r.URL.Query().Get("done")}
	q, err := parseBrowseQuery(r.URL.Query())
	if err != nil {
		p.Errors = []string{err.Error()}
		p.Data = browseView{Topic: topic, Query: q, PartSel: "all"}
		c.render(w, http.StatusBadRequest, "messages", p)
		return
	}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "messages", p, err)
		return
	}
	bv, err := c.browse(ctx, cl, topic, q)
	if unreachable(err) {
		c.renderUnreachable(w, r, "messages", p, err)
		return
	}
	p.Data = bv
	if err != nil {
		p.Errors = []string{errText(err)}
		c.render(w, httpCode(err), "messages", p)
		return
	}
	c.render(w, http.StatusOK, "messages", p)
}
