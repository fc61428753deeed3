package console

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

type tailView struct {
	Topic     string
	From      string // end, start or offset
	Offset    int64
	Partition string // "" for all
	Stream    string // the event stream's URL
}

func (c *Console) tailPage(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	tv := tailView{Topic: topic, From: q.Get("from"), Partition: q.Get("partition")}
	if tv.From == "" {
		tv.From = "end"
	}
	tv.Offset, _ = strconv.ParseInt(q.Get("offset"), 10, 64)
	tv.Stream = "/api/tail/" + url.PathEscape(topic) + "?" + q.Encode()
	c.render(w, http.StatusOK, "tail", page{Title: "Tail " + topic, Nav: "topics", Data: tv})
}

// tailRecord is one record as the tail page gets it. Keys, values and
// header values that are not printable UTF-8 are given in hex.
type tailRecord struct {
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp string       `json:"timestamp"`
	Key       *shownBytes  `json:"key"`
	Value     *shownBytes  `json:"value"`
	Headers   []tailHeader `json:"headers"`
}

type tailHeader struct {
	Key   string      `json:"key"`
	Value *shownBytes `json:"value"`
}

// shownBytes is bytes as text, or as hex when they are not printable; nil
// is a null key or value.
type shownBytes struct {
	Text string `json:"text"`
	Hex  bool   `json:"hex"`
}

func show(b []byte, null bool) *shownBytes {
	if null {
		return nil
	}
	if printable(b) {
		return &shownBytes{Text: string(b)}
	}
	return &shownBytes{Text: hex.EncodeToString(b), Hex: true}
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

func tailRecordOf(r *quirev1.ConsumedRecord) tailRecord {
	tr := tailRecord{Partition: r.GetPartition(), Offset: r.GetOffset(),
		Timestamp: time.UnixMilli(r.GetTimestampMs()).UTC().Format("2006-01-02 15:04:05.000Z07:00"),
		Key:       show(r.GetKeyBytes(), r.GetKeyData() == nil),
		Value:     show(r.GetValueBytes(), r.GetValueData() == nil)}
	for _, h := range r.GetHeaders() {
		tr.Headers = append(tr.Headers, tailHeader{Key: h.GetKey(), Value: show(h.GetValue(), h.GetValue() == nil)})
	}
	return tr
}

// positions is where a tail reads next, per partition; it is the event id
// ("p:offset,p:offset"), so a reconnecting page goes on where it was.
type positions map[int32]int64

func (ps positions) String() string {
	keys := make([]int32, 0, len(ps))
	for p := range ps {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	s := make([]string, len(keys))
	for i, p := range keys {
		s[i] = fmt.Sprintf("%d:%d", p, ps[p])
	}
	return strings.Join(s, ",")
}

func parsePositions(s string) (positions, bool) {
	ps := positions{}
	for _, f := range strings.Split(s, ",") {
		p, off, ok := strings.Cut(f, ":")
		pi, err1 := strconv.ParseInt(p, 10, 32)
		oi, err2 := strconv.ParseInt(off, 10, 64)
		if !ok || err1 != nil || err2 != nil || pi < 0 || oi < 0 {
			return nil, false
		}
		ps[int32(pi)] = oi
	}
	return ps, len(ps) > 0
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func (s sse) send(event, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		fmt.Fprintf(s.w, "id: %s\n", id)
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// tailStream streams a topic's records as server-sent events: "start"
// (the positions it reads from), "record" (a tailRecord), "problem" (the
// cluster's error in words; the stream keeps trying), "ok" (reading again
// after a problem) and "renew" (the stream ends after TailStreamMax; the
// page reconnects and goes on from its last event id). Query: from=end
// (default), start or offset (with offset=N); partition=N for one
// partition.
func (c *Console) tailStream(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "console: streaming unsupported", http.StatusInternalServerError)
		return
	}
	topic := r.PathValue("topic")
	q := r.URL.Query()
	from := q.Get("from")
	var at client.Offset
	switch from {
	case "", "end":
		at = client.AtEnd()
	case "start":
		at = client.AtStart()
	case "offset":
		n, err := strconv.ParseInt(q.Get("offset"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("console: offset %q is not a non-negative number", q.Get("offset")), http.StatusBadRequest)
			return
		}
		at = client.At(n)
	default:
		http.Error(w, fmt.Sprintf("console: from=%q: want end, start or offset", from), http.StatusBadRequest)
		return
	}
	var only []int32
	if s := q.Get("partition"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("console: partition %q is not a non-negative number", s), http.StatusBadRequest)
			return
		}
		only = []int32{int32(n)}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := sse{w, f}
	fmt.Fprint(w, "retry: 1000\n\n")
	f.Flush()

	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.TailStreamMax)
	defer cancel()
	go func() {
		select {
		case <-c.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	pos, resumed := parsePositions(r.Header.Get("Last-Event-ID"))
	troubled := false
	problem := func(err error) bool {
		troubled = true
		if out.send("problem", "", errText(err)) != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
			return true
		}
	}
	for !resumed {
		if err := func() error {
			cctx, ccancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
			defer ccancel()
			cl, err := c.client(cctx)
			if err != nil {
				return err
			}
			offs, err := cl.ListOffsets(cctx, topic, at, only...)
			if err != nil {
				return err
			}
			pos = positions(offs)
			return nil
		}(); err != nil {
			if !problem(err) {
				return
			}
			continue
		}
		break
	}
	if resumed {
		c.log.Debug("tail resumed", "topic", topic, "from", pos.String(), "client", r.RemoteAddr)
	} else {
		c.log.Info("tail reading", "topic", topic, "from", pos.String(), "client", r.RemoteAddr)
	}
	defer c.log.Debug("tail stream ended", "topic", topic, "client", r.RemoteAddr)
	if out.send("start", pos.String(), pos.String()) != nil {
		return
	}
	// A stream that reached TailStreamMax says so before it ends, so the
	// page reconnects without reporting a lost connection.
	defer func() {
		if r.Context().Err() == nil && c.ctx.Err() == nil {
			_ = out.send("renew", pos.String(), pos.String())
		}
	}()
	for ctx.Err() == nil {
		req := &quirev1.FetchRecordsMultiRequest{MaxWaitMs: 1000, MaxRecords: 200, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}
		for p, off := range pos {
			req.Partitions = append(req.Partitions, &quirev1.FetchRecordsPartition{Topic: topic, Partition: p, Offset: off})
		}
		sort.Slice(req.Partitions, func(i, j int) bool { return req.Partitions[i].Partition < req.Partitions[j].Partition })
		cctx, ccancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		res, err := c.fetchRecords(cctx, req)
		ccancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !problem(err) {
				return
			}
			continue
		}
		var perr error
		sent := 0
		for _, pr := range res.GetPartitions() {
			if e := pr.GetError(); e != nil && e.GetCode() != quirev1.ErrorCode_NONE {
				if perr == nil {
					perr = &client.Error{Code: e.GetCode(), Message: fmt.Sprintf("%s/%d: %s", topic, pr.GetPartition(), e.GetMessage())}
				}
				continue
			}
			for _, rec := range pr.GetRecords() {
				if rec.GetOffset() < pos[pr.GetPartition()] {
					continue
				}
				pos[pr.GetPartition()] = rec.GetOffset() + 1
				if out.send("record", pos.String(), tailRecordOf(rec)) != nil {
					return
				}
				sent++
			}
			if pr.GetNextOffset() > pos[pr.GetPartition()] {
				pos[pr.GetPartition()] = pr.GetNextOffset()
			}
		}
		if perr != nil {
			if !problem(perr) {
				return
			}
			continue
		}
		if troubled {
			troubled = false
			if out.send("ok", pos.String(), pos.String()) != nil {
				return
			}
		}
		if sent == 0 {
			if _, err := fmt.Fprint(w, ": waiting\n\n"); err != nil {
				return
			}
			f.Flush()
		}
	}
}
