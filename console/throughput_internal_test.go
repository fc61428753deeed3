package console

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/client"
)

func TestConsoleParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP quire_topic_bytes_in_total Batch bytes appended
# TYPE quire_topic_bytes_in_total counter
quire_topic_bytes_in_total{topic="a"} 1000
quire_topic_records_in_total{topic="a"} 10
quire_topic_bytes_out_total{topic="a"} 3e3
quire_topic_records_out_total{topic="we\"ird"} 7
quire_partition_size_bytes{partition="2",topic="a"} 4096
quire_partition_size_bytes{topic="a",partition="x"} 1
quire_partition_high_watermark{topic="a",partition="2"} 99
garbage{ 1
`
	counters, sizes, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if a := counters["a"]; a.bytesIn != 1000 || a.recordsIn != 10 || a.bytesOut != 3000 {
		t.Errorf("topic a: %+v", a)
	}
	if w := counters[`we"ird`]; w.recordsOut != 7 {
		t.Errorf("escaped topic: %+v (%v)", w, counters)
	}
	if len(sizes) != 1 || sizes[tp{"a", 2}] != 4096 {
		t.Errorf("sizes %v", sizes)
	}
}

// TestConsoleThroughputRates: rates are the counters' growth over the
// time between two samples, per topic and per broker (the leader's), the
// first sample a baseline only; a counter that went back (a restarted
// broker) gives no rate.
func TestConsoleThroughputRates(t *testing.T) {
	t.Parallel()
	th := newThroughput(3, []MetricsTarget{{Broker: "1", URL: "x"}})
	t0 := time.Unix(1000, 0)
	desc := func(hw0, hw1 int64) []client.TopicDescription {
		return []client.TopicDescription{{Name: "t", Partitions: []client.PartitionDescription{
			{Partition: 0, Leader: 1, HighWatermark: hw0}, {Partition: 1, Leader: 2, HighWatermark: hw1}}}}
	}
	m := func(in, out float64) []map[string]topicCounters {
		return []map[string]topicCounters{{"t": {bytesIn: in, bytesOut: out}}}
	}
	sizes := []map[tp]int64{{{"t", 0}: 500}}
	th.record(t0, desc(0, 0), m(0, 0), sizes, []error{nil})
	if len(th.snapshot()) != 0 {
		t.Fatal("the baseline made a sample")
	}
	th.record(t0.Add(10*time.Second), desc(100, 50), m(2000, 1000), sizes, []error{nil})
	s := th.snapshot()
	if len(s) != 1 {
		t.Fatalf("%d samples", len(s))
	}
	got := s[0]
	if r := got.Topics["t"]; r.RecordsIn != 15 || r.BytesIn != 200 || r.BytesOut != 100 {
		t.Errorf("topic rates %+v", r)
	}
	if r := got.Brokers["1"]; r.RecordsIn != 10 || r.BytesIn != 200 {
		t.Errorf("broker 1 rates %+v", r)
	}
	if r := got.Brokers["2"]; r.RecordsIn != 5 || !math.IsNaN(r.BytesIn) {
		t.Errorf("broker 2 rates %+v (no metrics: bytes unknown)", r)
	}
	if got.Total.RecordsIn != 15 {
		t.Errorf("total %+v", got.Total)
	}
	if sz, _ := th.partitionSizes(); sz[tp{"t", 0}] != 500 {
		t.Errorf("sizes %v", sz)
	}
	// The broker restarted: its counters began again.
	th.record(t0.Add(20*time.Second), desc(100, 50), m(10, 0), sizes, []error{nil})
	if r := th.snapshot()[1].Topics["t"]; r.RecordsIn != 0 || !math.IsNaN(r.BytesIn) {
		t.Errorf("after a restart %+v", r)
	}
	// A topic created since the last sample: its records all came since.
	th.record(t0.Add(30*time.Second), append(desc(100, 50), client.TopicDescription{Name: "new",
		Partitions: []client.PartitionDescription{{Partition: 0, Leader: 1, HighWatermark: 40}}}), m(10, 0), sizes, []error{nil})
	if r := th.snapshot()[2].Topics["new"]; r.RecordsIn != 4 {
		t.Errorf("a new topic's rates %+v", r)
	}
	for i := range 5 {
		th.record(t0.Add(time.Duration(40+10*i)*time.Second), desc(100, 50), m(10, 0), sizes, []error{nil})
	}
	if n := len(th.snapshot()); n != 3 {
		t.Errorf("%d samples kept, want 3", n)
	}
}

func TestConsoleTimeTicks(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 10, 0, 7, 0, time.UTC)
	ticks := timeTicks(start, 4*time.Minute, 600)
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "10:01 10:02 10:03 10:04" {
		t.Errorf("ticks %v", labels)
	}
	if ticks[0].Pos <= 0 || ticks[len(ticks)-1].Pos > 600 {
		t.Errorf("positions %+v", ticks)
	}
	if ticks := timeTicks(start, 20*time.Second, 600); len(ticks) != 4 || ticks[0].Label != "10:00:10" {
		t.Errorf("20 s: %+v", ticks)
	}
}

func TestConsoleUnits(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 3 << 20: "3 MiB"} {
		if got := byteSize(v); got != want {
			t.Errorf("byteSize(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 7: "7", 0.25: "0.25", 12.6: "13", 25000: "25k", 2.5e6: "2.5M"} {
		if got := count(v); got != want {
			t.Errorf("count(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestConsoleDecode(t *testing.T) {
	t.Parallel()
	if d := decode([]byte(`{"a":[1,2]}`), "json"); !d.OK || d.Text != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("json %+v", d)
	}
	if d := decode([]byte("nope"), "json"); d.OK || !strings.HasPrefix(d.Text, "not JSON") {
		t.Errorf("not json %+v", d)
	}
	if d := decode([]byte{0xff}, "utf8"); d.OK {
		t.Errorf("invalid utf8 %+v", d)
	}
	if d := decode([]byte("0123456789abcdefXY"), "hex"); d.Text != "00000000  30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66  0123456789abcdef\n00000010  58 59"+strings.Repeat(" ", 42)+"  XY\n" {
		t.Errorf("hex %q", d.Text)
	}
	for in, want := range map[string]string{` {"a":1}`: "json", "[1]": "json", "plain": "utf8", "\x00\x01": "hex", "{broken": "utf8"} {
		if got := bestDecoding([]byte(in)); got != want {
			t.Errorf("bestDecoding(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestConsoleBrowseQuery(t *testing.T) {
	t.Parallel()
	q, err := parseBrowseQuery(url.Values{"partition": {"2"}, "from": {"timestamp"}, "ts": {"2026-01-02T03:04:05Z"}, "limit": {"10"}})
	if err != nil || q.Partition != 2 || q.Limit != 10 || !q.timestampT.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("%+v %v", q, err)
	}
	for _, ts := range []string{"2026-01-02 03:04:05", "2026-01-02T03:04:05", "1767323045000"} {
		if got, err := parseTimestamp(ts); err != nil || !got.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("parseTimestamp(%q) = %v, %v", ts, got, err)
		}
	}
	q, err = parseBrowseQuery(url.Values{})
	if err != nil || q.From != "newest" || q.Partition != -1 || q.Limit != 50 {
		t.Fatalf("defaults %+v %v", q, err)
	}
}

func TestConsolePaginate(t *testing.T) {
	t.Parallel()
	lo, hi, p := paginate(120, 3, "/topics?")
	if lo != 100 || hi != 120 || p.Pages != 3 || p.Prev != "/topics?page=2" || p.Next != "" {
		t.Fatalf("%d %d %+v", lo, hi, p)
	}
	if lo, hi, p := paginate(0, 5, "/x?"); lo != 0 || hi != 0 || p.Page != 1 || p.Pages != 1 {
		t.Fatalf("empty: %d %d %+v", lo, hi, p)
	}
}

func TestConsoleNiceCeil(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]float64{0: 1, 0.3: 0.3, 0.31: 0.4, 1: 1, 7: 8, 10: 10, 11: 12, 507: 600, 4.5: 5, 26000: 30000} {
		if got := niceCeil(v); math.Abs(got-want) > 1e-9*want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
