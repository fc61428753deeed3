package console

import (
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// rateRow is a topic's or a broker's rates in the last sample.
type rateRow struct {
	Name                                     string
	RecordsIn, RecordsOut, BytesIn, BytesOut string
	sortKey                                  float64
}

func rateRowOf(name string, r rates) rateRow {
	f := func(v float64, format func(float64) string) string {
		if math.IsNaN(v) {
			return "–"
		}
		return format(v) + "/s"
	}
	return rateRow{Name: name, RecordsIn: f(r.RecordsIn, count), RecordsOut: f(r.RecordsOut, count),
		BytesIn: f(r.BytesIn, byteSize), BytesOut: f(r.BytesOut, byteSize), sortKey: addKnown(0, r.RecordsIn) + addKnown(0, r.BytesIn)}
}

type brokerRates struct {
	rateRow
	Records, Bytes chart
}

type throughputView struct {
	Samples  int
	Interval string
	Metrics  bool // bytes and records out known from brokers' metrics
	Records  chart
	Bytes    chart
	Total    rateRow
	Brokers  []brokerRates
	Topics   []rateRow
	Pager    pager
}

// pageSize is the rows of a paged list.
const pageSize = 50

// pager is a paged list's position: page N of Pages, and the links.
type pager struct {
	Page, Pages, Total int
	Prev, Next         string
	Filter             string
}

// paginate returns the bounds of page (from 1) of n rows, and the pager
// whose links are base plus page=N.
func paginate(n, page int, base string) (lo, hi int, p pager) {
	p.Total = n
	p.Pages = max(1, (n+pageSize-1)/pageSize)
	p.Page = min(max(page, 1), p.Pages)
	lo, hi = (p.Page-1)*pageSize, min(n, p.Page*pageSize)
	if p.Page > 1 {
		p.Prev = base + "page=" + strconv.Itoa(p.Page-1)
	}
	if p.Page < p.Pages {
		p.Next = base + "page=" + strconv.Itoa(p.Page+1)
	}
	return lo, hi, p
}

func pageParam(r *http.Request) int {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	return n
}

// sampleOnView takes a throughput sample for a page when the console has
// no background sampler.
func (c *Console) sampleOnView(r *http.Request) {
	if c.cfg.SampleInterval > 0 {
		return
	}
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	if err := c.sampleThroughput(ctx); err != nil {
		c.log.Debug("throughput sample failed", "error", err)
	}
}

func (c *Console) throughputPage(w http.ResponseWriter, r *http.Request) {
	c.sampleOnView(r)
	p := page{Title: "Throughput", Nav: "throughput", Refresh: c.refresh()}
	p.Errors = c.thr.scrapeErrors()
	samples := c.thr.snapshot()
	now := time.Now()
	tv := throughputView{Samples: len(samples), Metrics: len(c.cfg.MetricsURLs) > 0}
	if c.cfg.SampleInterval > 0 {
		tv.Interval = c.cfg.SampleInterval.String()
	}
	var last rates
	tv.Records, tv.Bytes, last = rateCharts(samples, func(s thrSample) (rates, bool) { return s.Total, true }, now)
	tv.Total = rateRowOf("cluster", last)
	ids := map[string]bool{}
	for _, s := range samples {
		for id := range s.Brokers {
			ids[id] = true
		}
	}
	names := make([]string, 0, len(ids))
	for id := range ids {
		names = append(names, id)
	}
	sort.Slice(names, func(i, j int) bool {
		a, ea := strconv.Atoi(names[i])
		b, eb := strconv.Atoi(names[j])
		if ea == nil && eb == nil {
			return a < b
		}
		return names[i] < names[j]
	})
	for _, id := range names {
		br := brokerRates{}
		var lr rates
		br.Records, br.Bytes, lr = rateCharts(samples, func(s thrSample) (rates, bool) { r, ok := s.Brokers[id]; return r, ok }, now)
		br.rateRow = rateRowOf(id, lr)
		tv.Brokers = append(tv.Brokers, br)
	}
	if n := len(samples); n > 0 {
		for name, rt := range samples[n-1].Topics {
			tv.Topics = append(tv.Topics, rateRowOf(name, rt))
		}
	}
	sort.Slice(tv.Topics, func(i, j int) bool {
		if tv.Topics[i].sortKey != tv.Topics[j].sortKey {
			return tv.Topics[i].sortKey > tv.Topics[j].sortKey
		}
		return tv.Topics[i].Name < tv.Topics[j].Name
	})
	lo, hi, pg := paginate(len(tv.Topics), pageParam(r), "/throughput?")
	tv.Topics, tv.Pager = tv.Topics[lo:hi], pg
	p.Data = tv
	c.render(w, http.StatusOK, "throughput", p)
}

// topicThroughput is a topic's charts on its page.
type topicThroughput struct {
	Samples        int
	Records, Bytes chart
	Last           rateRow
}

func (c *Console) topicThroughput(topic string) topicThroughput {
	samples := c.thr.snapshot()
	var tt topicThroughput
	var last rates
	tt.Records, tt.Bytes, last = rateCharts(samples, func(s thrSample) (rates, bool) { r, ok := s.Topics[topic]; return r, ok }, time.Now())
	tt.Samples = len(samples)
	tt.Last = rateRowOf(topic, last)
	return tt
}

// sizeText is a partition's size on disk for the topic page: "–" when
// unknown (no metrics of its leader).
func sizeText(sizes map[tp]int64, topic string, partition int32) string {
	if v, ok := sizes[tp{topic, partition}]; ok {
		return byteSize(float64(v))
	}
	return "–"
}
