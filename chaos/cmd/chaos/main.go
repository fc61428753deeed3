// Command chaos runs Quire's fault-injection suite against real `quire
// server` processes, or checks a history it saved.
//
//	chaos run [-nodes 3] [-duration 2m] [-seed N] [-faults kill,pause,...] [-timings test|default] [-hold 20s]
//	          [-txn-producers 2] [-txn-workers 2] [-history FILE] [-quire bin/quire]
//	chaos check FILE
//
// run prints its seed first: the same seed replays the same choices of
// faults and timings. It exits 1 when the history shows an anomaly.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quirelog/quire/chaos"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		os.Exit(run(os.Args[2:]))
	case "check":
		os.Exit(check(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: chaos run [flags] | chaos check HISTORY")
	os.Exit(2)
}

func run(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	nodes := fs.Int("nodes", 3, "nodes in the cluster (3 or 5)")
	duration := fs.Duration("duration", 2*time.Minute, "how long faults are injected")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed (printed; replays a run)")
	faults := fs.String("faults", strings.Join(chaos.AllFaults, ","), "comma-separated faults: "+strings.Join(chaos.AllFaults, ", "))
	history := fs.String("history", "", "write the history (JSON lines) to this file")
	bin := fs.String("quire", "bin/quire", "the quire binary")
	partitions := fs.Int("partitions", 4, "partitions of the workload's topic (RF 3, min.insync.replicas 2)")
	producers := fs.Int("producers", 4, "concurrent producers of plain unary Produce calls (one write at a time, no retries)")
	idempotent := fs.Int("idempotent-producers", 2, "producers through the Go client's idempotent producer (retries, many writes in flight)")
	members := fs.Int("group-members", 3, "members of one consumer group reading the topic, committing after processing")
	txnProducers := fs.Int("txn-producers", 2, "transactional producers, each transaction writing to 1-3 partitions (committed, aborted or abandoned at random)")
	txnWorkers := fs.Int("txn-workers", 2, "consume-transform-produce applications sending the group's offsets in their transactions")
	keep := fs.Bool("keep", false, "keep the nodes' directories")
	timings := fs.String("timings", "test", "node timings: test (short sessions and fetches, chaos.TestTimings) or default (the server's defaults)")
	hold := fs.Duration("hold", 0, "how long each fault is held (0: a random time in the fault's own range of seconds)")
	_ = fs.Parse(args)
	if *nodes < 3 {
		log.Printf("chaos: -nodes must be at least 3 (topics have 3 replicas)")
		return 2
	}
	for _, f := range strings.Split(*faults, ",") {
		if !known(f) {
			log.Printf("chaos: unknown fault %q (known: %s)", f, strings.Join(chaos.AllFaults, ", "))
			return 2
		}
	}
	if *timings != "test" && *timings != "default" {
		log.Printf("chaos: -timings must be test or default, not %q", *timings)
		return 2
	}
	dir, err := chaos.TempDir()
	if err != nil {
		log.Print(err)
		return 1
	}
	defer func() {
		if !*keep {
			os.RemoveAll(dir)
		}
	}()
	cfg := chaos.Config{Bin: *bin, Dir: dir, Nodes: *nodes, Duration: *duration, Seed: *seed,
		Faults: strings.Split(*faults, ","), Partitions: int32(*partitions), Producers: *producers,
		IdempotentProducers: *idempotent, GroupMembers: *members, TxnProducers: *txnProducers, TxnWorkers: *txnWorkers,
		DefaultTimings: *timings == "default", Hold: *hold,
		Logf: func(format string, a ...any) { log.Printf("chaos: "+format, a...) }}
	if *history != "" {
		f, err := os.Create(*history)
		if err != nil {
			log.Print(err)
			return 1
		}
		defer f.Close()
		cfg.History = f
	}
	log.Printf("chaos: seed %d, %d nodes, %v of faults (%s), %s timings, files in %s", *seed, *nodes, *duration, *faults, *timings, dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	report, err := chaos.Run(ctx, cfg)
	if err != nil {
		log.Printf("chaos: run failed (seed %d, files kept in %s): %v", *seed, dir, err)
		*keep = true
		return 1
	}
	fmt.Printf("chaos: seed %d, %d nodes, %v\n%s", *seed, *nodes, time.Since(start).Round(time.Second), report.Summary())
	if !report.OK() {
		*keep = true
		log.Printf("chaos: anomalies found; node files kept in %s", dir)
		return 1
	}
	return 0
}

func known(f string) bool {
	for _, k := range chaos.AllFaults {
		if f == k {
			return true
		}
	}
	return false
}

func check(args []string) int {
	if len(args) != 1 {
		usage()
	}
	events, err := chaos.ReadHistoryFile(args[0])
	if err != nil {
		log.Print(err)
		return 1
	}
	r := chaos.Check(events)
	fmt.Print(r.Summary())
	if !r.OK() {
		return 1
	}
	return 0
}
