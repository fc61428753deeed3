package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quirelog/quire/client"
)

// Throughput is sampled by the console itself, every SampleInterval (and
// when a page shows it, at most once a second): records in per topic and
// per broker from the high watermarks DescribeTopics answers (the
// difference between two samples, over the time between them, credited
// to each partition's leader), and, from the brokers' metrics listeners
// when the console is given them, bytes in and out, records out and each
// partition's size on disk. The samples are kept in a bounded ring in
// memory only.

// throughputSamples is how many samples the ring keeps.
const throughputSamples = 240

// MetricsTarget is a broker's metrics listener: URL is its /metrics,
// Broker the broker id it belongs to ("" names it by its address).
type MetricsTarget struct {
	Broker string
	URL    string
}

// rates are per-second figures over a sample's interval; NaN is unknown.
type rates struct {
	RecordsIn, BytesIn, RecordsOut, BytesOut float64
}

func unknownRates() rates { return rates{math.NaN(), math.NaN(), math.NaN(), math.NaN()} }

func (r *rates) add(o rates) {
	r.RecordsIn = addKnown(r.RecordsIn, o.RecordsIn)
	r.BytesIn = addKnown(r.BytesIn, o.BytesIn)
	r.RecordsOut = addKnown(r.RecordsOut, o.RecordsOut)
	r.BytesOut = addKnown(r.BytesOut, o.BytesOut)
}

func addKnown(a, b float64) float64 {
	switch {
	case math.IsNaN(b):
		return a
	case math.IsNaN(a):
		return b
	}
	return a + b
}

// thrSample is the rates over the interval that ended At.
type thrSample struct {
	At      time.Time
	Topics  map[string]rates // topics with traffic or known zero rates
	Brokers map[string]rates // by broker id, or a metrics target's address
	Total   rates
}

type tp struct {
	topic     string
	partition int32
}

// topicCounters are a broker's metrics counters for one topic.
type topicCounters struct{ recordsIn, bytesIn, recordsOut, bytesOut float64 }

type throughput struct {
	targets []MetricsTarget
	httpc   *http.Client

	mu      sync.Mutex
	max     int
	samples []thrSample
	prevAt  time.Time
	prevHW  map[tp]int64
	// prevTopics are the topics of the last sample: a topic not among
	// them is new, and its records all came since.
	prevTopics map[string]bool
	// prevMetrics are each target's counters at its last scrape.
	prevMetrics map[string]map[string]topicCounters
	prevScrape  map[string]time.Time
	// sizes are the partitions' sizes on disk from the last scrape of
	// their leader's metrics, and when that was.
	sizes   map[tp]int64
	sizesAt time.Time
	// scrapeErr is the last failed scrape, by target, in words.
	scrapeErr map[string]string
}

func newThroughput(max int, targets []MetricsTarget) *throughput {
	return &throughput{targets: targets, max: max, httpc: &http.Client{Timeout: 5 * time.Second},
		prevMetrics: map[string]map[string]topicCounters{}, prevScrape: map[string]time.Time{},
		sizes: map[tp]int64{}, scrapeErr: map[string]string{}}
}

// label names a metrics target: its broker id, or its address.
func (t MetricsTarget) label() string {
	if t.Broker != "" {
		return t.Broker
	}
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(t.URL, "http://"), "https://"), "/metrics")
}

// sampleThroughput takes a sample: one DescribeTopics, and a scrape of
// each metrics target. A sample within half a second of the last is
// skipped.
func (c *Console) sampleThroughput(ctx context.Context) error {
	t := c.thr
	t.mu.Lock()
	recent := !t.prevAt.IsZero() && time.Since(t.prevAt) < time.Second/2
	t.mu.Unlock()
	if recent {
		return nil
	}
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	topics, err := cl.DescribeTopics(ctx)
	if err != nil {
		return err
	}
	scrapes := make([]map[string]topicCounters, len(t.targets))
	sizes := make([]map[tp]int64, len(t.targets))
	errs := make([]error, len(t.targets))
	var wg sync.WaitGroup
	for i, tg := range t.targets {
		wg.Go(func() { scrapes[i], sizes[i], errs[i] = t.scrape(ctx, tg.URL) })
	}
	wg.Wait()
	now := time.Now()
	t.record(now, topics, scrapes, sizes, errs)
	return nil
}

// record turns what was read at now into a sample.
func (t *throughput) record(now time.Time, topics []client.TopicDescription, scrapes []map[string]topicCounters, sizes []map[tp]int64, errs []error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := thrSample{At: now, Topics: map[string]rates{}, Brokers: map[string]rates{}, Total: unknownRates()}
	hw := make(map[tp]int64, len(t.prevHW))
	names := make(map[string]bool, len(topics))
	secs := now.Sub(t.prevAt).Seconds()
	havePrev := !t.prevAt.IsZero()
	for _, td := range topics {
		names[td.Name] = true
		tr := unknownRates()
		for _, pd := range td.Partitions {
			if pd.HighWatermark < 0 {
				continue
			}
			k := tp{td.Name, pd.Partition}
			hw[k] = pd.HighWatermark
			prev, ok := t.prevHW[k]
			if !ok && havePrev && !t.prevTopics[td.Name] {
				prev, ok = 0, true // created since the last sample
			}
			if !havePrev || !ok || pd.HighWatermark < prev {
				continue
			}
			r := float64(pd.HighWatermark-prev) / secs
			tr.RecordsIn = addKnown(tr.RecordsIn, r)
			br := s.Brokers[strconv.Itoa(int(pd.Leader))]
			if br == (rates{}) {
				br = unknownRates()
			}
			br.RecordsIn = addKnown(br.RecordsIn, r)
			s.Brokers[strconv.Itoa(int(pd.Leader))] = br
		}
		if !math.IsNaN(tr.RecordsIn) {
			s.Topics[td.Name] = tr
		}
	}
	t.prevHW, t.prevAt, t.prevTopics = hw, now, names
	// Bytes and records out from the metrics; records in there too, but
	// the high watermarks' figure is kept (it counts every broker's).
	newSizes := map[tp]int64{}
	for i, tg := range t.targets {
		lbl := tg.label()
		if errs[i] != nil {
			t.scrapeErr[lbl] = errs[i].Error()
			delete(t.prevMetrics, lbl)
			continue
		}
		delete(t.scrapeErr, lbl)
		for k, v := range sizes[i] {
			newSizes[k] = v
		}
		prev, ok := t.prevMetrics[lbl]
		dt := now.Sub(t.prevScrape[lbl]).Seconds()
		t.prevMetrics[lbl], t.prevScrape[lbl] = scrapes[i], now
		if !ok || dt <= 0 {
			continue
		}
		br := s.Brokers[lbl]
		if br == (rates{}) {
			br = unknownRates()
		}
		for topic, cur := range scrapes[i] {
			p := prev[topic]
			if cur.bytesIn < p.bytesIn || cur.bytesOut < p.bytesOut || cur.recordsOut < p.recordsOut {
				continue // the broker restarted: its counters began again
			}
			r := rates{RecordsIn: math.NaN(), BytesIn: (cur.bytesIn - p.bytesIn) / dt,
				RecordsOut: (cur.recordsOut - p.recordsOut) / dt, BytesOut: (cur.bytesOut - p.bytesOut) / dt}
			tr, ok := s.Topics[topic]
			if !ok {
				tr = unknownRates()
			}
			tr.add(r)
			s.Topics[topic] = tr
			br.add(r)
		}
		// A broker with metrics but no traffic has known zero rates.
		br.BytesIn, br.BytesOut, br.RecordsOut = addKnown(br.BytesIn, 0), addKnown(br.BytesOut, 0), addKnown(br.RecordsOut, 0)
		s.Brokers[lbl] = br
	}
	if len(newSizes) > 0 || len(t.targets) > 0 {
		t.sizes, t.sizesAt = newSizes, now
	}
	if !havePrev {
		return // the first sample only sets the baseline
	}
	for _, r := range s.Topics {
		s.Total.add(r)
	}
	if math.IsNaN(s.Total.RecordsIn) {
		s.Total.RecordsIn = 0
	}
	t.samples = append(t.samples, s)
	if len(t.samples) > t.max {
		t.samples = append(t.samples[:0:0], t.samples[len(t.samples)-t.max:]...)
	}
}

// scrape reads a metrics listener's per-topic counters and partition
// sizes.
func (t *throughput) scrape(ctx context.Context, u string) (map[string]topicCounters, map[tp]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := t.httpc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the few series of Prometheus's text format the
// console uses.
func parseMetrics(r io.Reader) (map[string]topicCounters, map[tp]int64, error) {
	counters := map[string]topicCounters{}
	sizes := map[tp]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "quire_topic_") && !strings.HasPrefix(line, "quire_partition_size_bytes{") {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		switch name {
		case "quire_topic_records_in_total", "quire_topic_bytes_in_total", "quire_topic_records_out_total", "quire_topic_bytes_out_total":
			topic := labels["topic"]
			c := counters[topic]
			switch name {
			case "quire_topic_records_in_total":
				c.recordsIn = value
			case "quire_topic_bytes_in_total":
				c.bytesIn = value
			case "quire_topic_records_out_total":
				c.recordsOut = value
			default:
				c.bytesOut = value
			}
			counters[topic] = c
		case "quire_partition_size_bytes":
			p, err := strconv.ParseInt(labels["partition"], 10, 32)
			if err == nil {
				sizes[tp{labels["topic"], int32(p)}] = int64(value)
			}
		}
	}
	return counters, sizes, sc.Err()
}

// parseSample reads `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, 0, false
	}
	name, rest := line[:i], line[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, "=\"")
			if eq < 0 {
				return "", nil, 0, false
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				v.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return "", nil, 0, false
			}
			labels[key] = v.String()
			rest = rest[j+1:]
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// snapshot returns a copy of the samples, oldest first.
func (t *throughput) snapshot() []thrSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]thrSample(nil), t.samples...)
}

// partitionSizes returns the sizes on disk known from the last scrape,
// and when it was; nil without metrics targets.
func (t *throughput) partitionSizes() (map[tp]int64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.targets) == 0 {
		return nil, time.Time{}
	}
	return t.sizes, t.sizesAt
}

func (t *throughput) scrapeErrors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for lbl, e := range t.scrapeErr {
		out = append(out, fmt.Sprintf("metrics of %s: %s", lbl, e))
	}
	sort.Strings(out)
	return out
}

// rateCharts draws records per second (in, and out when known) and bytes
// per second (in and out) of what pick chooses from each sample.
func rateCharts(samples []thrSample, pick func(thrSample) (rates, bool), now time.Time) (recs, bytes chart, last rates) {
	times := make([]time.Time, 0, len(samples))
	var rin, rout, bin, bout []float64
	last = unknownRates()
	for _, s := range samples {
		r, ok := pick(s)
		if !ok {
			r = unknownRates()
		}
		times = append(times, s.At)
		rin, rout, bin, bout = append(rin, r.RecordsIn), append(rout, r.RecordsOut), append(bin, r.BytesIn), append(bout, r.BytesOut)
		last = r
	}
	perSec := func(f func(float64) string) func(float64) string {
		return func(v float64) string { return f(v) + "/s" }
	}
	recs = timeChart(times, []series{{"records in", "line", rin}, {"records out", "line out", rout}}, now, perSec(count))
	bytes = timeChart(times, []series{{"bytes in", "line", bin}, {"bytes out", "line out", bout}}, now, perSec(byteSize))
	return recs, bytes, last
}
