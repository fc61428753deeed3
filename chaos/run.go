package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/quirelog/quire/client"
)

// Config is one run of the suite.
type Config struct {
	Bin        string        // the quire binary
	Dir        string        // where the nodes keep their files
	Nodes      int           // 3 or 5
	Duration   time.Duration // how long the nemesis injects faults
	Seed       uint64        // randomness of the faults and the workload
	Faults     []string      // the mix; AllFaults when empty
	Partitions int32
	Producers  int
	// IdempotentProducers write through the Go client's idempotent
	// producer, GroupMembers read the topic as one consumer group.
	IdempotentProducers int
	GroupMembers        int
	// TxnProducers are transactional producers writing to many
	// partitions at once, TxnWorkers consume-transform-produce
	// applications (txn.go); none of either: no transactional workload.
	TxnProducers, TxnWorkers int
	History                  io.Writer // the history as JSON lines, or nil
	Logf                     func(format string, args ...any)
	// DefaultTimings runs the nodes with the default session, ISR and
	// fetch timings instead of TestTimings.
	DefaultTimings bool
	// Hold is how long each fault is held before it is healed; zero: a
	// random time in the fault kind's own range (seconds).
	Hold time.Duration
}

const (
	topic = "chaos"
	group = "chaos-group"
)

// Run starts the cluster, runs the workload under the nemesis for
// cfg.Duration, heals everything, waits for full ISRs, reads every
// partition back, stops the nodes and compares their logs, and checks
// the history. An error means the run itself could not be carried out
// (a node would not start, the cluster never recovered); anomalies are in
// the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	faults := cfg.Faults
	if len(faults) == 0 {
		faults = AllFaults
	}
	var net *Network
	var wantNet bool
	for _, f := range faults {
		wantNet = wantNet || networkFault(f)
	}
	if wantNet {
		var err error
		if net, err = NewNetwork(); err != nil {
			logf("network faults left out: %v", err)
			var keep []string
			for _, f := range faults {
				if !networkFault(f) {
					keep = append(keep, f)
				}
			}
			faults = keep
		} else {
			defer net.Close()
		}
	}
	if len(faults) == 0 {
		return nil, errors.New("chaos: no faults to inject")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	c, err := NewCluster(cfg.Bin, cfg.Dir, cfg.Nodes, net, logf)
	if err != nil {
		return nil, err
	}
	defer c.StopAll()
	if cfg.DefaultTimings {
		c.UseDefaultTimings()
	}
	if net != nil {
		for _, n := range c.nodes {
			if err := net.Register(n.ID, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.StartAll(startCtx); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(faults, testFault) {
		able := map[string]bool{FaultDiskError: c.DiskFaults(), FaultClockJump: c.ClockJumps()}
		faults = slices.DeleteFunc(slices.Clone(faults), func(f string) bool {
			if testFault(f) && !able[f] {
				logf("%s left out: %s is not a test build (go build -tags chaosfs ./cmd/quire)", f, cfg.Bin)
				return true
			}
			return false
		})
		if len(faults) == 0 {
			return nil, errors.New("chaos: no faults to inject")
		}
	}
	cl, err := client.New(startCtx, client.SeedBrokers(c.Brokers()...), client.RequestTimeout(5*time.Second),
		client.RetryBackoff(50*time.Millisecond), client.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := waitBrokersLive(startCtx, cl, cfg.Nodes); err != nil {
		return nil, err
	}
	if err := createTopic(startCtx, cl, topic, cfg.Partitions); err != nil {
		return nil, fmt.Errorf("chaos: create topic: %w", err)
	}
	if _, err := cl.ListOffsets(startCtx, topic, client.AtEnd()); err != nil {
		return nil, fmt.Errorf("chaos: topic never served: %w", err)
	}
	h := NewHistory(cfg.History)
	conns, err := dialAll(c.Brokers())
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()

	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var producers, readers sync.WaitGroup
	for i := range cfg.Producers {
		prng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		producers.Go(func() {
			producer(work, h, fmt.Sprintf("p%d", i), topic, cfg.Partitions, conns, prng, 5*time.Millisecond)
		})
	}
	if cfg.IdempotentProducers > 0 {
		icl, err := client.New(startCtx, client.SeedBrokers(c.Brokers()...), client.RequestTimeout(5*time.Second),
			client.RetryBackoff(50*time.Millisecond), client.DeliveryTimeout(30*time.Second),
			client.RecordPartitioner(client.ManualPartitioner()), client.Linger(2*time.Millisecond))
		if err != nil {
			return nil, err
		}
		defer icl.Close()
		for i := range cfg.IdempotentProducers {
			producers.Go(func() {
				idempotentProducer(work, h, icl, fmt.Sprintf("i%d", i), topic, cfg.Partitions, 64, 2*time.Millisecond)
			})
		}
	}
	readCtx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	for p := range cfg.Partitions {
		readers.Go(func() { _ = reader(readCtx, h, cl, fmt.Sprintf("r%d", p), topic, p) })
	}
	readers.Go(func() { hwPoller(readCtx, h, cl, topic, 200*time.Millisecond) })
	var members sync.WaitGroup
	memberErrs := make([]error, cfg.GroupMembers)
	for i := range cfg.GroupMembers {
		mrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(100+i)))
		name, instance := fmt.Sprintf("m%d", i), ""
		if i%2 == 1 {
			// Every other member is static: each of its terms takes the
			// place its previous one left (epoch -2), or replaces it when
			// that leave did not get through.
			instance = name
		}
		members.Go(func() { memberErrs[i] = groupMember(readCtx, h, cl, group, name, instance, topic, mrng) })
	}
	if cfg.GroupMembers > 0 {
		readers.Go(func() { committedPoller(readCtx, h, cl, group, topic, cfg.Partitions, 500*time.Millisecond) })
	}

	var txw *txnWorkload
	if cfg.TxnProducers > 0 || cfg.TxnWorkers > 0 {
		tcl, err := client.New(startCtx, client.SeedBrokers(c.Brokers()...), client.RequestTimeout(5*time.Second),
			client.RetryBackoff(50*time.Millisecond), client.DeliveryTimeout(30*time.Second), client.FetchMaxWait(250*time.Millisecond),
			client.RecordPartitioner(client.ManualPartitioner()), client.ReadCommitted())
		if err != nil {
			return nil, err
		}
		defer tcl.Close()
		txw = &txnWorkload{h: h, cl: tcl, plain: cl, parts: cfg.Partitions, writers: cfg.TxnProducers, worker: cfg.TxnWorkers,
			rng: rand.New(rand.NewPCG(rng.Uint64(), 7)), logf: logf}
		if err := txw.start(startCtx); err != nil {
			return nil, err
		}
	}

	nem := &nemesis{c: c, cl: cl, h: h, rng: rng, faults: faults, topic: topic, parts: cfg.Partitions, logf: logf, holdFor: cfg.Hold}
	if txw != nil {
		nem.moveTopics = []string{topic, txnTopic, txnInTopic}
	}
	faultCtx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	nemErr := nem.run(faultCtx)
	stopFaults()
	if net != nil {
		if err := net.Heal(); err != nil {
			return nil, err
		}
	}
	healCtx, cancelHeal := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelHeal()
	for _, n := range c.nodes {
		if !n.Running() {
			if err := c.Start(n); err != nil {
				return nil, err
			}
		}
		if err := c.WaitServing(healCtx, n); err != nil {
			return nil, fmt.Errorf("chaos: after healing: %w", err)
		}
	}
	if nemErr != nil {
		return nil, nemErr
	}
	logf("healed; writing on for a moment, then waiting for full ISRs")
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	stopWork()
	producers.Wait()
	if err := waitFullISR(healCtx, cl, topic); err != nil {
		return nil, err
	}
	h.Add(Event{Kind: ReaderReset, Process: "final"})
	if err := finalRead(healCtx, h, cl, topic, cfg.Partitions); err != nil {
		return nil, err
	}
	if cfg.GroupMembers > 0 {
		if err := waitGroupCaughtUp(healCtx, cl, group, topic, cfg.Partitions); err != nil {
			logf("%v", err)
		}
	}
	stopReads()
	readers.Wait()
	members.Wait()
	if err := errors.Join(memberErrs...); err != nil {
		return nil, err
	}
	if cfg.GroupMembers > 0 {
		// What the members committed as they left.
		if err := recordCommitted(healCtx, h, cl, group, topic, cfg.Partitions); err != nil {
			return nil, fmt.Errorf("chaos: the group's committed offsets after healing: %w", err)
		}
	}
	topics := []string{topic}
	if txw != nil {
		// Its own deadline: the heal's is partly spent.
		txCtx, cancelTx := context.WithTimeout(context.Background(), 2*time.Minute)
		err := txw.finish(txCtx)
		for _, t := range []string{txnTopic, txnInTopic} {
			if err == nil {
				err = waitFullISR(txCtx, cl, t)
			}
		}
		cancelTx()
		if err != nil {
			return nil, err
		}
		topics = append(topics, txnTopic, txnInTopic)
	}
	type replicaSet struct {
		dirs      []string
		topic     string
		partition int32
		hw        int64
	}
	var sets []replicaSet
	endCtx, cancelEnd := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelEnd()
	for _, t := range topics {
		ends, err := cl.ListOffsets(endCtx, t, client.AtEnd())
		if err != nil {
			return nil, err
		}
		ds, err := cl.DescribeTopics(endCtx, t)
		if err != nil || len(ds) != 1 || len(ds[0].Partitions) != int(cfg.Partitions) {
			return nil, fmt.Errorf("chaos: describe %s after healing: %v (%v)", t, err, ds)
		}
		for p := range cfg.Partitions {
			// The nodes holding a replica of p (with 5 nodes, 3 of them).
			var dirs []string
			for _, id := range ds[0].Partitions[p].Replicas {
				dirs = append(dirs, filepath.Join(c.Node(int(id)).Dir, "data"))
			}
			sets = append(sets, replicaSet{dirs, t, p, ends[p]})
		}
	}
	c.StopAll()
	report := Check(h.Events())
	for _, rs := range sets {
		diff, err := CompareReplicas(rs.dirs, fmt.Sprintf("%s-%d", rs.topic, rs.partition), rs.partition, rs.hw)
		if err != nil {
			return nil, err
		}
		for i := range diff {
			if rs.topic != topic {
				diff[i].Detail = rs.topic + ": " + diff[i].Detail
			}
		}
		report.Anomalies = append(report.Anomalies, diff...)
	}
	if err := h.Err(); err != nil {
		return report, fmt.Errorf("chaos: writing the history: %w", err)
	}
	return report, nil
}

// waitGroupCaughtUp polls until the group has committed every
// partition's high watermark, so that the group check covers the whole
// log; a group that does not catch up within ctx is reported, not fatal
// (what it did commit is still checked).
func waitGroupCaughtUp(ctx context.Context, cl *client.Client, group, topic string, partitions int32) error {
	var tps []client.TopicPartition
	for p := range partitions {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
	}
	var behind string
	for {
		ends, err := cl.ListOffsets(ctx, topic, client.AtEnd())
		if err == nil {
			var offs []client.CommittedOffset
			if offs, err = cl.FetchOffsets(ctx, group, tps...); err == nil {
				behind = ""
				for _, o := range offs {
					if o.Offset < ends[o.Partition] {
						behind += fmt.Sprintf(" %d:%d/%d", o.Partition, o.Offset, ends[o.Partition])
					}
				}
				if behind == "" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: the group did not catch up (partition:committed/end%s; %v)", behind, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitBrokersLive polls until the controller counts n unfenced brokers: a
// node serves its health check once it is up, which can be before the
// controller has seen its first heartbeat, and a replication factor of n
// is refused until it has.
func waitBrokersLive(ctx context.Context, cl *client.Client, n int) error {
	var last string
	for {
		d, err := cl.DescribeCluster(ctx)
		if err == nil {
			live := 0
			for _, b := range d.Brokers {
				if !b.Fenced {
					live++
				}
			}
			if live >= n {
				return nil
			}
			last = fmt.Sprintf("%d of %d brokers live", live, n)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: brokers never all live (%s): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitFullISR polls until every partition of topic has every replica in
// sync.
func waitFullISR(ctx context.Context, cl *client.Client, topic string) error {
	var last string
	for {
		ds, err := cl.DescribeTopics(ctx, topic)
		if err == nil && len(ds) == 1 {
			full := true
			for _, p := range ds[0].Partitions {
				if len(p.ISR) < len(p.Replicas) || p.Leader < 0 {
					full = false
					last = fmt.Sprintf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			if full {
				return nil
			}
		} else if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: ISRs of %s not full after healing (%s): %w", topic, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TempDir makes a directory for a run's nodes.
func TempDir() (string, error) { return os.MkdirTemp("", "quire-chaos-") }
