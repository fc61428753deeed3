package console

import (
	"fmt"
	"strings"
	"time"
)

// chart is a group's lag over time as an inline SVG polyline: x is time
// (the oldest sample at the left, now at the right), y the total lag (0 at
// the bottom, Max at the top).
type chart struct {
	Width, Height int
	ViewBox       string // room for the axis labels around the plot
	Points        string // "x,y x,y ..." in the SVG's coordinates
	Max           int64
	Last          int64
	Span          string // how far back the left edge is
	Samples       int
}

func lagChart(samples []lagSample, now time.Time) chart {
	ch := chart{Width: 600, Height: 120, Samples: len(samples)}
	ch.ViewBox = fmt.Sprintf("-60 -10 %d %d", ch.Width+70, ch.Height+20)
	if len(samples) == 0 {
		return ch
	}
	for _, s := range samples {
		ch.Max = max(ch.Max, s.Lag)
	}
	ch.Last = samples[len(samples)-1].Lag
	start := samples[0].At
	span := max(now.Sub(start), time.Second)
	ch.Span = span.Round(time.Second).String()
	top := float64(max(ch.Max, 1))
	var b strings.Builder
	for i, s := range samples {
		x := float64(ch.Width) * float64(s.At.Sub(start)) / float64(span)
		y := float64(ch.Height) * (1 - float64(s.Lag)/top)
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	// A single sample is drawn as a flat line up to now.
	if len(samples) == 1 {
		fmt.Fprintf(&b, " %d,%.1f", ch.Width, float64(ch.Height)*(1-float64(ch.Last)/top))
	}
	ch.Points = b.String()
	return ch
}
