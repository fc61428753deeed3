package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newProduceCmd) }

func newProduceCmd(g *globalFlags) *cobra.Command {
	var (
		key, keySep, acks, compression string
		partition                      int32
		verbose                        bool
		headers                        []string
		maxLine, batchMax              int
		txnID                          string
		txnAbort                       bool
		txRecords                      int
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Long: `Produce reads standard input and produces one record per line.

With -k every record gets that key; with --key-separator each line is split
at the first separator into key and value. Records without -p are spread by
murmur2 of the key (the partition Kafka would choose), keyless ones sticky.
With -v each record's partition and offset is printed once acknowledged.

A topic that does not exist is created with the broker's defaults when the
broker allows it (auto.create.topics.enable, on with --dev), saying so on
standard error, exactly as quire consume does; otherwise both fail at once.

With --transactional-id every line goes in one transaction, committed at
the end of input: consumers reading committed records only (quire consume
--isolation read_committed) see all of the lines or none. --tx-records N
commits one transaction every N lines instead (and the rest at the end).
--abort aborts them instead; an interrupt and a failure abort the open one. A second producer with the
same transactional id fences the first.

Ctrl-C (SIGINT) or SIGTERM stops reading at once, also while produce waits
for a line: the records already sent are waited for (30 s at most, or
until a second Ctrl-C), a line on standard error says how many were
acknowledged, and produce exits 130, as shells expect of a command a
Ctrl-C stopped; if any sent record failed or went unanswered it exits 1
saying how many.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := parseAcks(acks)
			if err != nil {
				return err
			}
			codec, err := parseCodec(compression)
			if err != nil {
				return err
			}
			hdrs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			opts := []client.Opt{client.RequiredAcks(a), client.Compression(codec)}
			if cmd.Flags().Changed("batch-max-bytes") {
				opts = append(opts, client.BatchMaxBytes(batchMax))
			}
			explicit := cmd.Flags().Changed("partition")
			if explicit {
				opts = append(opts, client.RecordPartitioner(client.ManualPartitioner()))
			}
			ctx, cancel := cmdContext()
			defer cancel()
			cl, err := newClient(ctx, g, opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			nparts, err := openTopic(ctx, cl, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if txnAbort && txnID == "" {
				return fmt.Errorf("--abort needs --transactional-id")
			}
			if cmd.Flags().Changed("tx-records") && txnID == "" {
				return fmt.Errorf("--tx-records needs --transactional-id")
			}
			if txRecords < 0 {
				return fmt.Errorf("bad --tx-records %d: a number of lines, or 0 for one transaction of the whole input", txRecords)
			}
			var tl *txnLines
			if txnID != "" {
				if a != client.AllISRAcks {
					return fmt.Errorf("--transactional-id needs --acks all")
				}
				if tl, err = newTxnLines(ctx, cl, txnID, args[0], nparts, explicit, partition, cmd.OutOrStdout(), verbose,
					txRecords, !txnAbort, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			p := &lineProducer{cl: cl, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), verbose: verbose, json: g.format == "json"}
			if maxLine < 1 {
				return fmt.Errorf("bad --max-line-bytes %d: it must be positive", maxLine)
			}
			lines := readLines(cmd.InOrStdin(), maxLine)
			n := 0
			interrupted := false
		read:
			for {
				// Standard input is read on its own goroutine so that an
				// interrupt ends produce at once, not when the next line
				// (or the end of input) comes.
				var line string
				var ok bool
				select {
				case line, ok = <-lines.c:
				case <-ctx.Done():
					interrupted = true
					break read
				}
				if !ok {
					break
				}
				n++
				r := &client.Record{Topic: args[0], Partition: partition, Headers: hdrs}
				switch {
				case keySep != "":
					k, v, ok := strings.Cut(line, keySep)
					if ok {
						r.Key, r.Value = []byte(k), []byte(v)
					} else {
						r.Value = []byte(line)
					}
				case cmd.Flags().Changed("key"):
					r.Key, r.Value = []byte(key), []byte(line)
				default:
					r.Value = []byte(line)
				}
				if tl != nil {
					if err := tl.add(ctx, r); err != nil {
						return tl.abort(context.WithoutCancel(ctx), err, cmd.ErrOrStderr())
					}
					continue
				}
				cl.Produce(ctx, r, p.done)
				if ctx.Err() != nil {
					interrupted = true
					break
				}
			}
			if tl != nil {
				if interrupted {
					return &exitError{code: exitInterrupted, err: tl.abort(context.WithoutCancel(ctx),
						fmt.Errorf("interrupted after %d lines", n), cmd.ErrOrStderr())}
				}
				if lines.err != nil {
					return tl.abort(context.WithoutCancel(ctx), fmt.Errorf("read stdin: %w", lines.err), cmd.ErrOrStderr())
				}
				return tl.end(ctx, !txnAbort, cmd.ErrOrStderr())
			}
			if interrupted {
				return p.interrupted(cl, n)
			}
			readErr := lines.err
			if errors.Is(readErr, bufio.ErrTooLong) {
				readErr = fmt.Errorf("line %d is longer than --max-line-bytes (%d bytes); the lines before it are produced, none from it on (raise --max-line-bytes; a record must also fit the topic's max.message.bytes)",
					n+1, maxLine)
			} else if readErr != nil {
				readErr = fmt.Errorf("read stdin: %w", readErr)
			}
			if err := cl.Flush(ctx); err != nil {
				if ctx.Err() != nil {
					return p.interrupted(cl, n)
				}
				return err
			}
			if readErr != nil {
				return readErr
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.failed > 0 {
				// Each error was printed as it came; say how many failed,
				// not the first error again.
				if p.printed {
					return fmt.Errorf("%d of %d records failed (errors above)", p.failed, p.failed+p.ok)
				}
				return fmt.Errorf("%d of %d records failed: %w", p.failed, p.failed+p.ok, p.firstErr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&key, "key", "k", "", "key for every record")
	f.StringVar(&keySep, "key-separator", "", "split each line at the first SEP into key and value")
	f.Int32VarP(&partition, "partition", "p", 0, "produce to this partition (default: by key)")
	f.StringVar(&acks, "acks", "all", "acks: all, 1 or 0")
	f.StringVarP(&compression, "compression", "z", "none", "none, gzip, snappy, lz4 or zstd")
	f.StringArrayVarP(&headers, "header", "H", nil, "header key=value for every record (repeatable)")
	f.BoolVarP(&verbose, "verbose", "v", false, "print where each record landed")
	f.IntVar(&maxLine, "max-line-bytes", 16<<20, "longest input line accepted (a longer one stops produce with an error)")
	f.IntVar(&batchMax, "batch-max-bytes", 0, "largest record batch built (default: the topic's max.message.bytes)")
	f.StringVar(&txnID, "transactional-id", "", "write every line in one transaction of this transactional id, committed at the end of input")
	f.BoolVar(&txnAbort, "abort", false, "with --transactional-id, abort the transaction at the end instead of committing it")
	f.IntVar(&txRecords, "tx-records", 0, "with --transactional-id, one transaction every N lines (the last one at the end of input); 0: one transaction of the whole input")
	return cmd
}

func parseHeaders(pairs []string) ([]client.RecordHeader, error) {
	var hs []client.RecordHeader
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad header %q (key=value)", p)
		}
		hs = append(hs, client.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

type lineProducer struct {
	cl            *client.Client
	out, errOut   io.Writer
	verbose, json bool

	mu       sync.Mutex
	ok       int
	failed   int
	firstErr error
	seen     map[string]bool // error messages already printed
	printed  bool            // some error was printed
}

func (p *lineProducer) done(r *client.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed++
		if p.firstErr == nil {
			p.firstErr = err
		}
		if err == context.Canceled {
			return
		}
		// Each record's error with -v; otherwise each distinct error
		// once, so a topic that refuses everything does not print a line
		// per input line.
		if p.verbose {
			fmt.Fprintf(p.errOut, "error: %s: %v\n", echoValue(r.Value), err)
			p.printed = true
			return
		}
		if msg := err.Error(); !p.seen[msg] {
			if p.seen == nil {
				p.seen = map[string]bool{}
			}
			p.seen[msg] = true
			fmt.Fprintf(p.errOut, "error: %v\n", err)
			p.printed = true
		}
		return
	}
	p.ok++
	if !p.verbose {
		return
	}
	if p.json {
		b, _ := json.Marshal(map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset})
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	fmt.Fprintf(p.out, "produced to %s/%d at offset %d\n", r.Topic, r.Partition, r.Offset)
}

// openTopic returns topic's partition count. A topic that does not exist
// is created, by produce and consume alike, when the broker allows it
// (auto.create.topics.enable, as Kafka's producers and consumers do), and
// a line on errOut says so: a mistyped name is not silently a new topic.
// Otherwise the broker's UNKNOWN_TOPIC_OR_PARTITION comes back at once.
func openTopic(ctx context.Context, cl *client.Client, topic string, errOut io.Writer) (int32, error) {
	n, created, err := cl.EnsureTopic(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("topic %s: %w", topic, err)
	}
	if created {
		fmt.Fprintf(errOut, "created topic %s with %d partitions (it did not exist; the broker has auto.create.topics.enable)\n", topic, n)
	}
	return n, nil
}
