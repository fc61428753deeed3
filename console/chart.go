package console

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// chart is a time series drawn as inline SVG polylines: x is time (the
// oldest sample at the left, now at the right, with clock-time ticks in
// UTC), y the value (0 at the bottom, Max at the top, with its ticks).
type chart struct {
	Width, Height int
	ViewBox       string // room for the axis labels around the plot
	Points        string // the first line's "x,y x,y ..." in the SVG's coordinates
	Max           int64
	Last          int64
	Span          string // how far back the left edge is
	Samples       int
	XTicks        []tick
	YTicks        []tick
	Lines         []line
}

// tick is an axis mark: its position along the axis and its label.
type tick struct {
	Pos   float64
	Label string
}

// line is one series of a chart.
type line struct {
	Name, Class, Points string
	Last                string // the newest value, in the chart's unit
}

// series is one line's values, a value per sample time.
type series struct {
	Name, Class string
	Values      []float64 // NaN: unknown at that time (not drawn)
}

const chartWidth, chartHeight = 600, 120

// timeChart draws series over times (oldest first) up to now; format
// writes a value in the chart's unit.
func timeChart(times []time.Time, ss []series, now time.Time, format func(float64) string) chart {
	ch := chart{Width: chartWidth, Height: chartHeight, Samples: len(times)}
	ch.ViewBox = fmt.Sprintf("-70 -10 %d %d", ch.Width+90, ch.Height+32)
	if len(times) == 0 {
		return ch
	}
	top := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	ch.Max = int64(math.Ceil(top))
	start := times[0]
	span := max(now.Sub(start), time.Second)
	ch.Span = span.Round(time.Second).String()
	scale := niceCeil(top)
	for _, s := range ss {
		var b strings.Builder
		last := math.NaN()
		for i, t := range times {
			if i >= len(s.Values) || math.IsNaN(s.Values[i]) {
				continue
			}
			v := s.Values[i]
			x := float64(ch.Width) * float64(t.Sub(start)) / float64(span)
			y := float64(ch.Height) * (1 - v/scale)
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x, y)
			last = v
		}
		// A single sample is drawn as a flat line up to now.
		if !math.IsNaN(last) && !strings.Contains(b.String(), " ") {
			fmt.Fprintf(&b, " %d,%.1f", ch.Width, float64(ch.Height)*(1-last/scale))
		}
		l := line{Name: s.Name, Class: s.Class, Points: b.String(), Last: "–"}
		if !math.IsNaN(last) {
			l.Last = format(last)
		}
		ch.Lines = append(ch.Lines, l)
	}
	if len(ch.Lines) > 0 {
		ch.Points = ch.Lines[0].Points
	}
	ch.YTicks = []tick{{float64(ch.Height), format(0)}, {float64(ch.Height) / 2, format(scale / 2)}, {0, format(scale)}}
	if top == 0 {
		ch.YTicks = ch.YTicks[:1]
	}
	ch.XTicks = timeTicks(start, span, ch.Width)
	return ch
}

// niceCeil is the round number at or above v that tops a chart's y axis:
// 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tickSteps are the spacings of the time axis's ticks.
var tickSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// timeTicks marks the time axis from start over span at a round step,
// at most 6 ticks, labelled with the UTC clock time.
func timeTicks(start time.Time, span time.Duration, width int) []tick {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 5 {
			step = s
			break
		}
	}
	layout := "15:04:05"
	if step >= time.Minute {
		layout = "15:04"
	}
	var out []tick
	for t := start.Truncate(step); !t.After(start.Add(span)); t = t.Add(step) {
		if t.Before(start) {
			continue
		}
		out = append(out, tick{Pos: float64(width) * float64(t.Sub(start)) / float64(span), Label: t.UTC().Format(layout)})
	}
	return out
}

func lagChart(samples []lagSample, now time.Time) chart {
	times := make([]time.Time, len(samples))
	vals := make([]float64, len(samples))
	for i, s := range samples {
		times[i], vals[i] = s.At, float64(s.Lag)
	}
	ch := timeChart(times, []series{{Name: "total lag", Class: "line", Values: vals}}, now, func(v float64) string { return count(v) })
	if len(samples) > 0 {
		ch.Last = samples[len(samples)-1].Lag
	}
	return ch
}

// count writes a number of records, in thousands or millions past them.
func count(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1fM", v/1e6))
	case v >= 1e4:
		return trimZero(fmt.Sprintf("%.1fk", v/1e3))
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	}
	return trimZero(fmt.Sprintf("%.2f", v))
}

// byteSize writes a number of bytes in binary units.
func byteSize(v float64) string {
	const unit = 1024
	if v < unit {
		return trimZero(fmt.Sprintf("%.1f", v)) + " B"
	}
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || i == 3 {
			return trimZero(fmt.Sprintf("%.1f", v)) + " " + u
		}
	}
	return ""
}

func trimZero(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' })
	if i < 0 {
		i = len(s)
	}
	num, suffix := s[:i], s[i:]
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + suffix
}
