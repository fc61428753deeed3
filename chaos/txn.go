package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/quirelog/quire/client"
)

// The transactional workload: transactional producers writing to many
// partitions of one topic at once, and consume-transform-produce workers
// reading an input topic and writing what they read to the same output
// topic with the group's offsets in the same transaction, both through
// the Go client's Transaction. Each transaction is committed, aborted on
// purpose, or abandoned as if its application had died, and a new
// instance with the same transactional id takes over and fences it. A
// read_committed reader tails the output; after healing, the output is
// read again (read_committed and read_uncommitted), the input is read,
// and the group's offsets are asked, for the checker (txncheck.go).

const (
	txnTopic   = "chaos-txn"       // the transactional output
	txnInTopic = "chaos-txn-in"    // the consume-transform-produce input
	txnGroup   = "chaos-txn-group" // whose offsets the workers send
	// txnSentinel is written (plainly) to every output partition once
	// the workload has stopped: the final reads read up to it.
	txnSentinel = "end"
	// txnTimeout is each transaction's timeout: one left open longer (an
	// application that died and never came back) is aborted by the
	// coordinator.
	txnTimeout = 20 * time.Second
	// txnOpTimeout bounds each call made to set an application up.
	txnOpTimeout = 10 * time.Second
)

// callTimeout bounds one write or end of a transaction: drawn between 1
// and 10 s, so that a fault under way makes some of them give up (a
// commit then has an unknown outcome).
func (a *txnApp) callTimeout() time.Duration {
	return time.Second + time.Duration(a.rng.Int64N(int64(9*time.Second)))
}

// How a transaction is ended, as drawn.
type txnEnd int

const (
	endCommit  txnEnd = iota
	endAbort          // deliberately
	endAbandon        // the application "dies": a new instance fences it
)

// drawEnd picks how a transaction ends: mostly commits, about one in ten
// aborted, one in twenty abandoned.
func drawEnd(rng *rand.Rand) txnEnd {
	switch x := rng.IntN(20); {
	case x < 2:
		return endAbort
	case x < 3:
		return endAbandon
	}
	return endCommit
}

// txnApp is one transactional application: its id and its current
// instance (a Transaction; nil when it has to be made again).
type txnApp struct {
	h   *History
	cl  *client.Client
	id  string
	rng *rand.Rand
	tx  *client.Transaction
	n   int
}

// init makes a new instance of the application: NewTransaction with its
// id, which fences the previous instance and aborts its open transaction,
// retried (each fault passes) until it succeeds or stop ends.
func (a *txnApp) init(stop context.Context) bool {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), txnOpTimeout)
		tx, err := a.cl.NewTransaction(ctx, a.id, txnTimeout)
		cancel()
		if err == nil {
			a.tx = tx
			return true
		}
		select {
		case <-stop.Done():
			return false
		case <-time.After(200 * time.Millisecond): // paces the retries
		}
	}
}

// begin opens the next transaction and returns its label.
func (a *txnApp) begin() (string, error) {
	a.n++
	return fmt.Sprintf("%s.%d", a.id, a.n), a.tx.Begin()
}

// write writes values to partition p of the output in transaction label,
// recording each record's send and, once answered, its offset.
func (a *txnApp) write(label string, p int32, values []string) error {
	recs := make([]*client.Record, len(values))
	for i, v := range values {
		a.h.Add(Event{Kind: TxnSend, Process: a.id, Txn: label, Partition: p, Value: v})
		recs[i] = &client.Record{Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.callTimeout())
	offs, err := a.tx.Produce(ctx, txnTopic, p, recs...)
	cancel()
	if err != nil {
		return err
	}
	for i, v := range values {
		a.h.Add(Event{Kind: TxnWrite, Process: a.id, Txn: label, Partition: p, Offset: offs[i], Value: v})
	}
	return nil
}

// end ends transaction label as drawn (an abort when ok is false: a call
// of it failed), records the outcome, and reports whether it committed.
// After anything but a clean commit or abort the application starts a
// new instance (init), so the next transaction starts from a known
// state.
func (a *txnApp) end(stop context.Context, label string, how txnEnd, ok bool) bool {
	if !ok {
		how = endAbort
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.callTimeout())
	defer cancel()
	switch how {
	case endCommit:
		a.h.Add(Event{Kind: TxnCommitting, Process: a.id, Txn: label})
		if err := a.tx.Commit(ctx); err != nil {
			a.h.Add(Event{Kind: TxnUnknown, Process: a.id, Txn: label, Error: err.Error()})
			a.tx = nil
			return false
		}
		a.h.Add(Event{Kind: TxnCommit, Process: a.id, Txn: label})
		return true
	case endAbort:
		why := "deliberate"
		if !ok {
			why = "a call failed"
		}
		// Never committed, whatever Abort answers.
		a.h.Add(Event{Kind: TxnAbort, Process: a.id, Txn: label, Error: why})
		if err := a.tx.Abort(ctx); err != nil {
			a.tx = nil
		}
		return false
	}
	// Abandoned: a new instance fences this one, whose next call must be
	// refused.
	a.h.Add(Event{Kind: TxnAbort, Process: a.id, Txn: label, Error: "abandoned"})
	zombie := a.tx
	if !a.init(stop) {
		a.tx = nil
		return false
	}
	// A context of its own: init may have taken longer than ctx's
	// timeout under a fault, and a zombie call failing on an expired
	// context would check nothing.
	ctx, cancel = context.WithTimeout(context.Background(), a.callTimeout())
	defer cancel()
	if a.rng.IntN(2) == 0 {
		v := label + ".zombie"
		a.h.Add(Event{Kind: TxnSend, Process: a.id, Txn: label, Partition: 0, Value: v})
		// Refused (PRODUCER_FENCED, or a timeout while the cluster
		// fails: either way never committed); accepted is an anomaly.
		if offs, err := zombie.Produce(ctx, txnTopic, 0, &client.Record{Value: []byte(v)}); err == nil {
			a.h.Add(Event{Kind: TxnWrite, Process: a.id, Txn: label, Partition: 0, Offset: offs[0], Value: v})
			a.h.Add(Event{Kind: TxnZombie, Process: a.id, Txn: label, Value: v, Error: "a fenced instance's write was accepted"})
		}
	} else if err := zombie.Commit(ctx); err == nil {
		a.h.Add(Event{Kind: TxnZombie, Process: a.id, Txn: label, Error: "a fenced instance's commit was accepted"})
	}
	return false
}

// txnWriter is a produce-only transactional application: each
// transaction writes 1-3 records to each of 1-3 partitions of the
// output.
func txnWriter(stop context.Context, a *txnApp, parts int32) {
	for stop.Err() == nil {
		if a.tx == nil && !a.init(stop) {
			return
		}
		label, err := a.begin()
		if err != nil {
			a.tx = nil
			continue
		}
		ok := true
		first := a.rng.Int32N(parts)
		for i := range min(parts, 1+a.rng.Int32N(3)) {
			p := (first + i) % parts
			var values []string
			for j := range 1 + a.rng.IntN(3) {
				values = append(values, fmt.Sprintf("%s.%d.%d", label, p, j))
			}
			if err := a.write(label, p, values); err != nil {
				ok = false
				break
			}
		}
		a.end(stop, label, drawEnd(a.rng), ok)
		select {
		case <-stop.Done():
		case <-time.After(time.Duration(a.rng.IntN(20)) * time.Millisecond): // paces the writer
		}
	}
}

// txnWorker is a consume-transform-produce application owning some
// partitions of the input: it reads them (read_committed) from the
// group's committed offsets, writes each record read to the output
// partition its offset picks (so a transaction spans partitions), as
// "label.j@partition:offset", and sends the next offsets of what it read
// to the transaction. After a transaction that did not commit it starts
// again from the group's committed offsets.
func txnWorker(stop context.Context, a *txnApp, inputs []int32, outParts int32) {
	var cons *client.Consumer
	defer func() {
		if cons != nil {
			cons.Close()
		}
	}()
	tps := make([]client.TopicPartition, len(inputs))
	for i, p := range inputs {
		tps[i] = client.TopicPartition{Topic: txnInTopic, Partition: p}
	}
	for stop.Err() == nil {
		if a.tx == nil && !a.init(stop) {
			return
		}
		if cons == nil {
			ctx, cancel := context.WithTimeout(stop, txnOpTimeout)
			offs, err := a.cl.FetchOffsets(ctx, txnGroup, tps...)
			cancel()
			if err != nil {
				select {
				case <-stop.Done():
				case <-time.After(200 * time.Millisecond): // paces the retries
				}
				continue
			}
			assign := map[int32]client.Offset{}
			for _, o := range offs {
				assign[o.Partition] = client.At(max(o.Offset, 0))
			}
			if cons, err = a.cl.NewConsumer(map[string]map[int32]client.Offset{txnInTopic: assign}); err != nil {
				return
			}
		}
		pctx, cancel := context.WithTimeout(stop, 500*time.Millisecond)
		recs, _ := cons.Poll(pctx)
		cancel()
		if len(recs) == 0 {
			continue
		}
		label, err := a.begin()
		if err != nil {
			a.tx = nil
			cons.Close()
			cons = nil
			continue
		}
		out := map[int32][]string{}
		next := map[int32]int64{}
		for j, r := range recs {
			p := int32(r.Offset % int64(outParts))
			out[p] = append(out[p], fmt.Sprintf("%s.%d@%d:%d", label, j, r.Partition, r.Offset))
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		}
		ok := true
		for _, p := range slices.Sorted(maps.Keys(out)) {
			if err := a.write(label, p, out[p]); err != nil {
				ok = false
				break
			}
		}
		if ok {
			var offs []client.OffsetCommit
			for _, p := range slices.Sorted(maps.Keys(next)) {
				a.h.Add(Event{Kind: TxnOffsets, Process: a.id, Txn: label, Partition: p, Offset: next[p]})
				offs = append(offs, client.OffsetCommit{Topic: txnInTopic, Partition: p, Offset: next[p], LeaderEpoch: -1})
			}
			ctx, cancel := context.WithTimeout(context.Background(), a.callTimeout())
			ok = a.tx.SendOffsets(ctx, txnGroup, offs...) == nil
			cancel()
		}
		if !a.end(stop, label, drawEnd(a.rng), ok) {
			// Read again from what the group committed.
			cons.Close()
			cons = nil
		}
	}
}

// txnFeeder writes the input: a record to each partition every few
// milliseconds, through the idempotent producer (what reaches the log is
// read back after healing; its acknowledgements are not checked here).
func txnFeeder(stop context.Context, cl *client.Client, parts int32) {
	for seq := 0; stop.Err() == nil; seq++ {
		var recs []*client.Record
		for p := range parts {
			recs = append(recs, &client.Record{Topic: txnInTopic, Partition: p, Value: fmt.Appendf(nil, "in-%d-%d", p, seq)})
		}
		_ = cl.ProduceSync(stop, recs...)
		select {
		case <-stop.Done():
		case <-time.After(25 * time.Millisecond): // paces the input
		}
	}
}

// txnReader tails every partition of the output, read_committed, until
// it has read each partition's sentinel (written once the workload has
// stopped) or ctx ends. A reader that cannot start, or stops short of a
// sentinel, is an error: its reads are what the checker's live-read
// checks check, and none would pass them unchecked.
func txnReader(ctx context.Context, h *History, cl *client.Client, parts int32) error {
	assign := map[int32]client.Offset{}
	for p := range parts {
		assign[p] = client.At(0)
	}
	var cons *client.Consumer
	for {
		var err error
		if cons, err = cl.NewConsumer(map[string]map[int32]client.Offset{txnTopic: assign}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: the read_committed reader never started: %w", err)
		case <-time.After(time.Second): // the cluster may be failing: try again
		}
	}
	defer cons.Close()
	done := map[int32]bool{}
	var lastErr error
	for len(done) < int(parts) {
		recs, err := cons.Poll(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("chaos: the read_committed reader stopped before the end of %d of %d partitions (last poll error: %v)",
				int(parts)-len(done), parts, lastErr)
		}
		if err != nil {
			lastErr = err
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // a failing cluster: poll again shortly
			}
		}
		for _, r := range recs {
			if string(r.Value) == txnSentinel {
				done[r.Partition] = true
			}
			h.Add(Event{Kind: TxnRead, Process: "tr", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
	}
	return nil
}

// txnWorkload is the transactional workload of a run.
type txnWorkload struct {
	h               *History
	cl              *client.Client // read_committed, manual partitions
	plain           *client.Client // read_uncommitted
	parts           int32
	writers, worker int
	rng             *rand.Rand
	logf            func(string, ...any)

	stop     context.CancelFunc // the applications
	stopFeed context.CancelFunc
	stopRead context.CancelFunc
	apps     sync.WaitGroup
	feed     sync.WaitGroup
	readers  sync.WaitGroup
	readErr  error // txnReader's, once readers is done
}

// start creates the topics and starts the applications, the feeder and
// the reader.
func (w *txnWorkload) start(ctx context.Context) error {
	for _, t := range []string{txnTopic, txnInTopic} {
		if err := createTopic(ctx, w.plain, t, w.parts); err != nil {
			return fmt.Errorf("chaos: create topic %s: %w", t, err)
		}
		if _, err := w.plain.ListOffsets(ctx, t, client.AtEnd()); err != nil {
			return fmt.Errorf("chaos: topic %s never served: %w", t, err)
		}
	}
	apps, stop := context.WithCancel(context.Background())
	feed, stopFeed := context.WithCancel(context.Background())
	read, stopRead := context.WithCancel(context.Background())
	w.stop, w.stopFeed, w.stopRead = stop, stopFeed, stopRead
	for i := range w.writers {
		a := &txnApp{h: w.h, cl: w.cl, id: fmt.Sprintf("tw%d", i), rng: rand.New(rand.NewPCG(w.rng.Uint64(), uint64(200+i)))}
		w.apps.Go(func() { txnWriter(apps, a, w.parts) })
	}
	for i := range w.worker {
		var inputs []int32
		for p := int32(i); p < w.parts; p += int32(w.worker) {
			inputs = append(inputs, p)
		}
		a := &txnApp{h: w.h, cl: w.cl, id: fmt.Sprintf("ctp%d", i), rng: rand.New(rand.NewPCG(w.rng.Uint64(), uint64(300+i)))}
		w.apps.Go(func() { txnWorker(apps, a, inputs, w.parts) })
	}
	if w.worker > 0 {
		w.feed.Go(func() { txnFeeder(feed, w.cl, w.parts) })
	}
	w.readers.Go(func() { w.readErr = txnReader(read, w.h, w.cl, w.parts) })
	return nil
}

// finish stops the input, lets the workers catch up with it, stops the
// applications (each ends its transaction first), marks every output
// partition's end and reads everything back for the checker.
func (w *txnWorkload) finish(ctx context.Context) error {
	w.stopFeed()
	w.feed.Wait()
	if w.worker > 0 {
		if err := waitGroupCaughtUp(ctx, w.plain, txnGroup, txnInTopic, w.parts); err != nil {
			w.logf("transactional workload: %v", err)
		}
	}
	w.stop()
	w.apps.Wait()
	var ends []*client.Record
	for p := range w.parts {
		ends = append(ends, &client.Record{Topic: txnTopic, Partition: p, Value: []byte(txnSentinel)})
	}
	if err := w.cl.ProduceSync(ctx, ends...); err != nil {
		return fmt.Errorf("chaos: marking the transactional output's end: %w", err)
	}
	if err := readToSentinel(ctx, w.cl, w.parts, func(r *client.Record) {
		w.h.Add(Event{Kind: TxnFinal, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	}); err != nil {
		return fmt.Errorf("chaos: final read_committed read: %w", err)
	}
	if err := readToSentinel(ctx, w.plain, w.parts, func(r *client.Record) {
		w.h.Add(Event{Kind: TxnLog, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	}); err != nil {
		return fmt.Errorf("chaos: final read_uncommitted read: %w", err)
	}
	// The reader stops once it has read every sentinel too: wait for
	// it, within ctx.
	readDone := make(chan struct{})
	go func() { w.readers.Wait(); close(readDone) }()
	select {
	case <-readDone:
	case <-ctx.Done():
	}
	w.stopRead()
	<-readDone
	if w.readErr != nil {
		return w.readErr
	}
	if w.worker == 0 {
		return nil
	}
	if err := readLogs(ctx, w.plain, txnInTopic, w.parts, func(int32, int64) {}, func(p int32, off int64, v string) {
		w.h.Add(Event{Kind: TxnInput, Partition: p, Offset: off, Value: v})
	}); err != nil {
		return err
	}
	var tps []client.TopicPartition
	for p := range w.parts {
		tps = append(tps, client.TopicPartition{Topic: txnInTopic, Partition: p})
	}
	offs, err := w.plain.FetchOffsets(ctx, txnGroup, tps...)
	if err != nil {
		return fmt.Errorf("chaos: the transactional group's offsets: %w", err)
	}
	for _, o := range offs {
		w.h.Add(Event{Kind: TxnGroupOffset, Process: "committed", Partition: o.Partition, Offset: max(o.Offset, 0)})
	}
	return nil
}

// readToSentinel reads every partition of the output from 0 until its
// sentinel (written after the workload stopped) with cl's isolation.
func readToSentinel(ctx context.Context, cl *client.Client, parts int32, fn func(*client.Record)) error {
	assign := map[int32]client.Offset{}
	for p := range parts {
		assign[p] = client.At(0)
	}
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{txnTopic: assign})
	if err != nil {
		return err
	}
	defer cons.Close()
	done := map[int32]bool{}
	for len(done) < int(parts) {
		recs, err := cons.Poll(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("the end of %d of %d partitions read: %w (last: %v)", len(done), parts, ctx.Err(), err)
		}
		for _, r := range recs {
			if done[r.Partition] {
				continue
			}
			if string(r.Value) == txnSentinel {
				done[r.Partition] = true
				continue
			}
			fn(r)
		}
	}
	return nil
}
