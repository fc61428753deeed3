package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newConsumeCmd) }

func newConsumeCmd(g *globalFlags) *cobra.Command {
	var (
		partitions []int32
		offset     string
		count      int
		format     string
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Consume prints the records of a topic's partitions (all, or those given with
-p) from a start position: start, end, an exact offset, or @TIMESTAMP (ms
since the epoch, or RFC 3339). Without -n it follows the topic until
interrupted.

The -f format prints each record with these verbs:
  %v value   %k key   %p partition   %o offset   %t timestamp (ms)
  %T topic   %h headers (k=v,...)   %%  a percent sign
and the escapes \n, \t and \\. The default is '%v\n'. --format json prints
one JSON object per record instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := parseOffset(offset)
			if err != nil {
				return err
			}
			pf, err := compileFormat(format)
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			topic := args[0]
			n, err := cl.PartitionCount(ctx, topic)
			if err != nil {
				return fmt.Errorf("topic %s: %w", topic, err)
			}
			assign := map[int32]client.Offset{}
			if len(partitions) == 0 {
				for p := int32(0); p < n; p++ {
					assign[p] = start
				}
			}
			for _, p := range partitions {
				if p < 0 || p >= n {
					return fmt.Errorf("topic %s has no partition %d (it has %d)", topic, p, n)
				}
				assign[p] = start
			}
			cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: assign})
			if err != nil {
				return err
			}
			defer cons.Close()
			w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			defer w.Flush()
			seen := 0
			for count <= 0 || seen < count {
				recs, err := cons.Poll(ctx)
				if err != nil {
					if errors.Is(err, context.Canceled) && ctx.Err() != nil {
						return nil // interrupted
					}
					if len(recs) == 0 {
						return err
					}
					fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
				}
				for _, r := range recs {
					if count > 0 && seen >= count {
						break
					}
					seen++
					if g.format == "json" {
						writeJSONRecord(w, r)
					} else {
						pf.write(w, r)
					}
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32SliceVarP(&partitions, "partitions", "p", nil, "partitions to read (default all), comma-separated")
	f.StringVarP(&offset, "offset", "o", "start", "start at start, end, OFFSET or @TIMESTAMP")
	f.IntVarP(&count, "num", "n", 0, "stop after this many records (default: follow)")
	f.StringVarP(&format, "print-format", "f", `%v\n`, "format of each record (see above)")
	return cmd
}

func parseOffset(s string) (client.Offset, error) {
	switch s {
	case "start", "oldest", "earliest", "beginning":
		return client.AtStart(), nil
	case "end", "newest", "latest":
		return client.AtEnd(), nil
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		if ms, err := strconv.ParseInt(ts, 10, 64); err == nil {
			return client.AtTimestamp(time.UnixMilli(ms)), nil
		}
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return client.Offset{}, fmt.Errorf("bad timestamp %q: ms since the epoch or RFC 3339", ts)
		}
		return client.AtTimestamp(t), nil
	}
	o, err := strconv.ParseInt(s, 10, 64)
	if err != nil || o < 0 {
		return client.Offset{}, fmt.Errorf("bad --offset %q: start, end, OFFSET or @TIMESTAMP", s)
	}
	return client.At(o), nil
}

// recordFormat is a compiled -f format: literal text and verbs.
type recordFormat []formatPart

type formatPart struct {
	lit  string
	verb byte
}

func compileFormat(f string) (recordFormat, error) {
	var out recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(f[i])
			}
		case c == '%' && i+1 < len(f):
			i++
			switch v := f[i]; v {
			case '%':
				lit.WriteByte('%')
			case 'v', 'k', 'p', 'o', 't', 'T', 'h':
				flush()
				out = append(out, formatPart{verb: v})
			default:
				return nil, fmt.Errorf("unknown format verb %%%c", v)
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

func (f recordFormat) write(w *bufio.Writer, r *client.Record) {
	var num [20]byte
	for _, p := range f {
		switch p.verb {
		case 0:
			w.WriteString(p.lit)
		case 'v':
			w.Write(r.Value)
		case 'k':
			w.Write(r.Key)
		case 'p':
			w.Write(strconv.AppendInt(num[:0], int64(r.Partition), 10))
		case 'o':
			w.Write(strconv.AppendInt(num[:0], r.Offset, 10))
		case 't':
			w.Write(strconv.AppendInt(num[:0], r.Timestamp.UnixMilli(), 10))
		case 'T':
			w.WriteString(r.Topic)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
}

type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func writeJSONRecord(w io.Writer, r *client.Record) {
	jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	if r.Key != nil {
		k := string(r.Key)
		jr.Key = &k
	}
	if r.Value != nil {
		v := string(r.Value)
		jr.Value = &v
	}
	if len(r.Headers) > 0 {
		jr.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			jr.Headers[h.Key] = string(h.Value)
		}
	}
	b, _ := json.Marshal(jr)
	w.Write(append(b, '\n'))
}
