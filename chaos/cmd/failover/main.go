// Command failover measures, for one fault at a time on a fresh 3-node
// cluster of `quire server` processes, how long each partition goes
// without an acknowledged acks=all write through the Go client (default
// client settings: idempotent, 30 s request and 2 m delivery timeouts).
//
//	failover [-faults kill,pause,isolate,cut-link] [-timings test|default] [-hold 20s] [-after 15s] [-on-controller] [-quire bin/quire]
//
// Each fault hits the leader of a partition that is not the controller
// (-on-controller: one that is): kill -9 and a restart after the hold,
// SIGSTOP and SIGCONT, or cutting it off from the other nodes; or cuts the
// link between the two nodes that are not the controller, the leader and
// a follower of a partition. The longest gap
// between two acknowledgements of one partition that overlaps the fault
// (from its start until -after past the heal) is that partition's
// unavailability. Network faults need root and iptables (see
// chaos.Network).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/chaos"
	"github.com/quirelog/quire/client"
)

func main() {
	faults := flag.String("faults", "kill,pause,isolate,cut-link", "faults to measure, one cluster each: kill, pause, isolate, cut-link")
	timings := flag.String("timings", "test", "node timings: test (chaos.TestTimings) or default (the server's defaults)")
	hold := flag.Duration("hold", 10*time.Second, "how long each fault is held")
	after := flag.Duration("after", 15*time.Second, "how long writes go on after the heal")
	bin := flag.String("quire", "bin/quire", "the quire binary")
	flag.BoolVar(&onController, "on-controller", false, "hit a leader that is also the controller (kill, pause, isolate); else one that is not")
	flag.BoolVar(&keep, "keep", false, "keep the nodes' directories (logs in nodeN/quire.log, the client's debug log in client.log) and log progress twice a second")
	flag.Parse()
	if *timings != "test" && *timings != "default" {
		log.Fatalf("failover: -timings must be test or default, not %q", *timings)
	}
	fmt.Printf("%-9s %-8s %-6s %-9s %-44s %s\n", "fault", "timings", "hold", "longest", "per partition (first ack after start, after heal)", "records failed")
	bad := false
	for _, f := range strings.Split(*faults, ",") {
		res, err := measure(f, *timings == "default", *hold, *after, *bin)
		if err != nil {
			log.Printf("failover: %s: %v", f, err)
			bad = true
			continue
		}
		fmt.Printf("%-9s %-8s %-6v %-9v %-44s %d\n", f, *timings, *hold, res.longest.Round(10*time.Millisecond), res.detail, res.failed)
	}
	if bad {
		os.Exit(1)
	}
}

var keep, onController bool

type result struct {
	longest time.Duration
	detail  string
	failed  int
}

const (
	topic = "failover"
	parts = 3
)

func measure(fault string, defaults bool, hold, after time.Duration, bin string) (*result, error) {
	logf := func(format string, a ...any) { log.Printf("failover: "+fault+": "+format, a...) }
	dir, err := chaos.TempDir()
	if err != nil {
		return nil, err
	}
	if keep {
		logf("node files in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	var net *chaos.Network
	if fault == chaos.FaultIsolate || fault == chaos.FaultCutLink {
		if net, err = chaos.NewNetwork(); err != nil {
			return nil, err
		}
		defer net.Close()
	}
	c, err := chaos.NewCluster(bin, dir, 3, net, logf)
	if err != nil {
		return nil, err
	}
	defer c.StopAll()
	if defaults {
		c.UseDefaultTimings()
	}
	var ids []int
	for _, n := range c.Nodes() {
		ids = append(ids, n.ID)
		if net != nil {
			if err := net.Register(n.ID, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.StartAll(ctx); err != nil {
		return nil, err
	}
	opts := []client.Opt{client.SeedBrokers(c.Brokers()...), client.RecordPartitioner(client.ManualPartitioner())}
	if keep {
		f, err := os.Create(filepath.Join(dir, "client.log"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		opts = append(opts, client.Logger(hclog.New(&hclog.LoggerOptions{Name: "client", Level: hclog.Debug, Output: f})))
	}
	cl, err := client.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for {
		// Until every broker has registered.
		_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: parts, ReplicationFactor: 3,
			Configs: map[string]string{"min.insync.replicas": "2"}})
		if err == nil {
			break
		}
		if client.ErrorCode(err) != quirev1.ErrorCode_INVALID_REPLICATION_FACTOR || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}

	var mu sync.Mutex
	acks := make([][]time.Time, parts)
	failed := 0
	var produced atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := int32(0); p < parts; p++ {
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				produced.Add(1)
				cl.Produce(ctx, &client.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)},
					func(_ *client.Record, err error) {
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							if failed == 0 {
								logf("record failed: %v", err)
							}
							failed++
							return
						}
						acks[p] = append(acks[p], time.Now())
					})
			}
		})
	}
	defer func() { close(stop); wg.Wait(); _ = cl.Flush(ctx) }()
	if keep {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
				mu.Lock()
				var last []string
				for p, as := range acks {
					if n := len(as); n > 0 {
						last = append(last, fmt.Sprintf("p%d:%d@%s", p, n, as[n-1].Format("05.000")))
					}
				}
				mu.Unlock()
				logf("buffered %d, acks %v, produced %v", cl.BufferedRecords(), last, produced.Load())
			}
		}()
	}
	acked := func(since time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, as := range acks {
			if len(as) == 0 || !as[len(as)-1].After(since) {
				return false
			}
		}
		return true
	}
	for begin := time.Now(); !acked(begin.Add(3 * time.Second)); time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no acknowledged writes on every partition before the fault")
		}
	}
	ds, err := cl.DescribeTopics(ctx, topic)
	if err != nil || len(ds) != 1 {
		return nil, fmt.Errorf("describe: %v", err)
	}
	ctl := 0
	if d, err := cl.DescribeCluster(ctx); err == nil {
		ctl = int(d.ControllerID)
	}
	p0 := ds[0].Partitions[0]
	// The victim leads a partition and is the controller or not, as
	// -on-controller says. A cut link is the one between the two nodes
	// that are not the controller: both keep their sessions, and only the
	// ISR shrink (after replica.lag.time.max.ms) frees the partition's
	// acks=all writes.
	wantCtl := onController && fault != chaos.FaultCutLink
	found := false
	for _, pd := range ds[0].Partitions {
		if (int(pd.Leader) == ctl) == wantCtl {
			p0, found = pd, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("no partition led by %s (controller %d)", map[bool]string{true: "the controller", false: "another node"}[wantCtl], ctl)
	}
	if keep {
		for _, pd := range ds[0].Partitions {
			logf("partition %d: leader %d, ISR %v", pd.Partition, pd.Leader, pd.ISR)
		}
		for _, n := range c.Nodes() {
			logf("node %d at %s", n.ID, n.Addr)
		}
	}
	victim := c.Node(int(p0.Leader))
	follower := 0
	for _, r := range p0.ISR {
		if r != p0.Leader && int(r) != ctl {
			follower = int(r)
			break
		}
	}

	start := time.Now()
	switch fault {
	case chaos.FaultKill:
		logf("kill -9 node %d (controller %d)", victim.ID, ctl)
		err = c.Kill(victim)
	case chaos.FaultPause:
		logf("SIGSTOP node %d (controller %d)", victim.ID, ctl)
		err = c.Pause(victim)
	case chaos.FaultIsolate:
		logf("isolating node %d (controller %d)", victim.ID, ctl)
		err = net.Isolate(victim.ID, ids)
	case chaos.FaultCutLink:
		logf("cutting the link between nodes %d and %d, leader and follower of partition %d (controller %d)", victim.ID, follower, p0.Partition, ctl)
		err = net.Cut(victim.ID, follower)
	default:
		return nil, fmt.Errorf("unknown fault %q", fault)
	}
	if err != nil {
		return nil, err
	}
	time.Sleep(hold) // the fault's hold
	switch fault {
	case chaos.FaultKill:
		err = c.Start(victim)
	case chaos.FaultPause:
		err = c.Resume(victim)
	default:
		err = net.Heal()
	}
	if err != nil {
		return nil, err
	}
	healed := time.Now()
	if err := c.WaitServing(ctx, victim); err != nil {
		return nil, err
	}
	for !acked(healed.Add(after)) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("not every partition acknowledged writes %v after the heal", after)
		}
		time.Sleep(50 * time.Millisecond)
	}
	end := healed.Add(after)

	mu.Lock()
	defer mu.Unlock()
	res := &result{failed: failed}
	var details []string
	for p, as := range acks {
		as = slices.Clone(as)
		slices.SortFunc(as, func(a, b time.Time) int { return a.Compare(b) })
		var longest time.Duration
		var first, firstHealed time.Time
		prev := time.Time{}
		for _, t := range as {
			if t.After(start) && first.IsZero() {
				first = t
			}
			if t.After(healed) && firstHealed.IsZero() {
				firstHealed = t
			}
			if !prev.IsZero() && t.After(start) && prev.Before(end) {
				if g := t.Sub(later(prev, start)); g > longest {
					longest = g
				}
			}
			prev = t
		}
		res.longest = max(res.longest, longest)
		details = append(details, fmt.Sprintf("p%d %v (%v, %v)", p, longest.Round(10*time.Millisecond),
			first.Sub(start).Round(10*time.Millisecond), firstHealed.Sub(healed).Round(10*time.Millisecond)))
	}
	res.detail = strings.Join(details, " ")
	return res, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
