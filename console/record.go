package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// decoded is bytes shown one way: as UTF-8 text, as pretty JSON, or as a
// hex dump. OK is false when the bytes are not valid in that form (then
// Text says why).
type decoded struct {
	As   string
	Text string
	OK   bool
}

// decodings are the forms a record's value can be shown in, in the order
// of the page's tabs.
var decodings = []string{"utf8", "json", "hex"}

func decode(b []byte, as string) decoded {
	d := decoded{As: as}
	switch as {
	case "utf8":
		if !utf8.Valid(b) {
			d.Text = "not valid UTF-8: see hex"
			return d
		}
		d.Text, d.OK = string(b), true
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err != nil {
			d.Text = "not JSON: " + err.Error()
			return d
		}
		d.Text, d.OK = buf.String(), true
	default:
		d.As, d.Text, d.OK = "hex", hexDump(b), true
	}
	return d
}

// bestDecoding is the form a value is shown in first: JSON when it is
// JSON, UTF-8 when it is printable text, else hex.
func bestDecoding(b []byte) string {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		return "json"
	}
	if printable(b) {
		return "utf8"
	}
	return "hex"
}

// hexDump is b as lines of 16 bytes: offset, hex, and the printable
// ASCII.
func hexDump(b []byte) string {
	var s strings.Builder
	for i := 0; i < len(b); i += 16 {
		line := b[i:min(i+16, len(b))]
		fmt.Fprintf(&s, "%08x  %-47s  ", i, strings.TrimSpace(spaced(hex.EncodeToString(line))))
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				s.WriteByte(c)
			} else {
				s.WriteByte('.')
			}
		}
		s.WriteByte('\n')
	}
	return s.String()
}

func spaced(h string) string {
	var s strings.Builder
	for i := 0; i < len(h); i += 2 {
		s.WriteString(h[i : i+2])
		s.WriteByte(' ')
	}
	return s.String()
}

type recordView struct {
	Topic      string
	Partition  int32
	Offset     int64
	Timestamp  string
	TimestampM int64
	Epoch      int32
	KeyNull    bool
	Key        decoded
	ValueNull  bool
	ValueSize  int
	As         string
	Value      decoded
	Decodings  []string
	Headers    []recordHeader
	Back       string
}

type recordHeader struct {
	Key   string
	Value *shownBytes
}

// readRecord reads the record at offset of topic/partition, or says why
// there is none.
func (c *Console) readRecord(ctx context.Context, topic string, partition int32, offset int64) (*quirev1.ConsumedRecord, error) {
	res, err := c.fetchRecords(ctx, &quirev1.FetchRecordsMultiRequest{MaxRecords: 1, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES,
		Partitions: []*quirev1.FetchRecordsPartition{{Topic: topic, Partition: partition, Offset: offset}}})
	if err != nil {
		return nil, err
	}
	for _, pr := range res.GetPartitions() {
		if e := pr.GetError(); e != nil && e.GetCode() != quirev1.ErrorCode_NONE {
			return nil, &client.Error{Code: e.GetCode(), Message: e.GetMessage()}
		}
		for _, r := range pr.GetRecords() {
			if r.GetOffset() == offset {
				return r, nil
			}
		}
	}
	return nil, &client.Error{Code: quirev1.ErrorCode_OFFSET_OUT_OF_RANGE,
		Message: fmt.Sprintf("no record at offset %d of %s/%d (not written yet, deleted, or not a record's offset)", offset, topic, partition)}
}

func (c *Console) recordPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	topic := r.PathValue("topic")
	p := page{Title: "Record of " + topic, Nav: "topics", Refresh: -1}
	part, err1 := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	off, err2 := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if err1 != nil || err2 != nil || part < 0 || off < 0 {
		p.Errors = []string{fmt.Sprintf("%s/%s: want a partition and an offset, both non-negative numbers", r.PathValue("partition"), r.PathValue("offset"))}
		c.render(w, http.StatusBadRequest, "record", p)
		return
	}
	if _, err := c.client(ctx); err != nil {
		c.renderUnreachable(w, r, "record", p, err)
		return
	}
	rec, err := c.readRecord(ctx, topic, int32(part), off)
	if unreachable(err) {
		c.renderUnreachable(w, r, "record", p, err)
		return
	}
	if err != nil {
		p.Errors = []string{errText(err)}
		code := httpCode(err)
		if errorCode(err) == quirev1.ErrorCode_OFFSET_OUT_OF_RANGE {
			code = http.StatusNotFound
		}
		c.render(w, code, "record", p)
		return
	}
	rv := recordView{Topic: topic, Partition: rec.GetPartition(), Offset: rec.GetOffset(), TimestampM: rec.GetTimestampMs(),
		Timestamp: time.UnixMilli(rec.GetTimestampMs()).UTC().Format("2006-01-02 15:04:05.000Z07:00"),
		Epoch:     rec.GetLeaderEpoch(), KeyNull: rec.GetKeyData() == nil, ValueNull: rec.GetValueData() == nil,
		ValueSize: len(rec.GetValueBytes()), Decodings: decodings,
		Back: fmt.Sprintf("/topics/%s/messages?partition=%d&from=offset&offset=%d", url.PathEscape(topic), rec.GetPartition(), rec.GetOffset())}
	rv.Key = decode(rec.GetKeyBytes(), bestDecoding(rec.GetKeyBytes()))
	rv.As = r.URL.Query().Get("as")
	switch rv.As {
	case "utf8", "json", "hex":
	case "":
		rv.As = bestDecoding(rec.GetValueBytes())
	default:
		p.Errors = []string{fmt.Sprintf("as=%q: show the value as utf8, json or hex", rv.As)}
		c.render(w, http.StatusBadRequest, "record", p)
		return
	}
	rv.Value = decode(rec.GetValueBytes(), rv.As)
	for _, h := range rec.GetHeaders() {
		rv.Headers = append(rv.Headers, recordHeader{Key: h.GetKey(), Value: show(h.GetValue(), h.GetValue() == nil)})
	}
	p.Data = rv
	c.render(w, http.StatusOK, "record", p)
}

// produceRecord produces one record from the form on the messages page:
// key, value, headers (one name=value a line) and a partition (empty: the
// key's partition, or any without a key). It answers with the record's
// page.
func (c *Console) produceRecord(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"topic", "partition", "key", "value", "headers"},
		func(a *actionInput) (string, bool, string) {
			topic := a.required("topic", "a topic")
			part := "the partition the key hashes to"
			if a.str("key") == "" {
				part = "a partition the producer picks"
			}
			if s := a.str("partition"); s != "" {
				n, err := strconv.ParseInt(s, 10, 32)
				if err != nil || n < 0 {
					a.errs = append(a.errs, fmt.Sprintf("the partition must be a non-negative number, not %q", s))
				}
				part = fmt.Sprintf("partition %d", n)
			}
			hs, err := parseHeaders(a.r.PostForm.Get("headers"))
			if err != nil {
				a.errs = append(a.errs, err.Error())
			}
			key := fmt.Sprintf("key %q", a.r.PostForm.Get("key"))
			if a.str("key") == "" {
				key = "no key"
			}
			return fmt.Sprintf("Produce a record to topic %q, %s, with %s, a value of %d bytes and %d headers.", topic, part, key,
				len(a.r.PostForm.Get("value")), len(hs)), false, "/topics/" + url.PathEscape(topic) + "/messages"
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			topic := a.str("topic")
			rec := &client.Record{Topic: topic, Partition: -1, Value: []byte(a.r.PostForm.Get("value"))}
			if k := a.r.PostForm.Get("key"); k != "" {
				rec.Key = []byte(k)
			}
			if s := a.str("partition"); s != "" {
				n, _ := strconv.ParseInt(s, 10, 32)
				rec.Partition = int32(n)
			}
			rec.Headers, _ = parseHeaders(a.r.PostForm.Get("headers"))
			if err := cl.ProduceSync(ctx, rec); err != nil {
				return "", err
			}
			return done(fmt.Sprintf("/topics/%s/messages?partition=%d&from=offset&offset=%d", url.PathEscape(topic), rec.Partition, rec.Offset),
				fmt.Sprintf("Produced a record to %s/%d at offset %d.", topic, rec.Partition, rec.Offset)), nil
		})
}

// parseHeaders reads headers, one name=value a line ("name" alone: an
// empty value).
func parseHeaders(s string) ([]client.RecordHeader, error) {
	var out []client.RecordHeader
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("header line %d (%q) has no name: write name=value, one a line", i+1, line)
		}
		out = append(out, client.RecordHeader{Key: strings.TrimSpace(k), Value: []byte(v)})
	}
	return out, nil
}
