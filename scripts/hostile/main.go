// Command hostile sends a running node malformed and hostile requests
// over both of its listeners (gRPC and Kafka's wire protocol) and checks
// that each is answered with a clear error or a closed connection, that
// the node still serves afterwards, and that the records written before
// the sweep read back byte for byte the same after it. It prints every
// case and its outcome, and exits 1 if any answer was unclear (INTERNAL,
// UNKNOWN, OK where a refusal was due, a refusal without a
// quire.v1.Error, no answer at all) or the node stopped serving.
//
// scripts/e2e_hostile.sh starts a dev node and runs it:
//
//	go run ./scripts/hostile -grpc 127.0.0.1:9092 -kafka 127.0.0.1:9093 [-metrics 127.0.0.1:9404]
//
// A case the node cannot yet answer as it should (a known gap, named in
// the case) is PENDING rather than a failure, unless -strict.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// outcome is one case's verdict.
type outcome int

const (
	pass outcome = iota
	pending
	fail
)

func (o outcome) String() string {
	return [...]string{"ok", "PENDING", "FAIL"}[o]
}

// sweep runs the cases and keeps the tally.
type sweep struct {
	conn      *grpc.ClientConn
	grpcAddr  string
	kafkaAddr string
	strict    bool
	n         [3]int
}

// report prints a case's line and counts it.
func (s *sweep) report(name string, o outcome, detail string) {
	if o == pending && s.strict {
		o = fail
	}
	s.n[o]++
	fmt.Printf("%-7s %-62s %s\n", o, name, oneLine(detail))
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func main() {
	grpcAddr := flag.String("grpc", "", "the node's gRPC address")
	kafkaAddr := flag.String("kafka", "", "the node's Kafka listener address")
	metricsAddr := flag.String("metrics", "", "the node's metrics address (optional: heap figures)")
	strict := flag.Bool("strict", false, "count PENDING cases as failures")
	flag.Parse()
	if *grpcAddr == "" || *kafkaAddr == "" {
		fmt.Fprintln(os.Stderr, "hostile: -grpc and -kafka are required")
		os.Exit(2)
	}
	cc, err := grpc.NewClient(*grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(2)
	}
	defer cc.Close()
	s := &sweep{conn: cc, grpcAddr: *grpcAddr, kafkaAddr: *kafkaAddr, strict: *strict}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before, err := s.writeKept(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile: writing the records to keep:", err)
		os.Exit(1)
	}

	s.grpcMalformed(ctx)
	s.grpcHostile(ctx)
	heap0, sys0 := heap(*metricsAddr)
	s.kafkaHostile(ctx)
	heap1, sys1 := heap(*metricsAddr)

	// The node still serves, and kept what it had.
	if err := s.alive(ctx); err != nil {
		s.report("node alive after the sweep (produce and fetch)", fail, err.Error())
	} else {
		s.report("node alive after the sweep (produce and fetch)", pass, "")
	}
	if err := s.sameRecords(ctx, before); err != nil {
		s.report("records written before the sweep unchanged", fail, err.Error())
	} else {
		s.report("records written before the sweep unchanged", pass, fmt.Sprintf("%d partitions byte-identical", len(before)))
	}
	if heap0 > 0 && heap1 > 0 {
		fmt.Printf("heap in use (after a GC): %.1f MiB before the Kafka cases, %.1f MiB after; heap taken from the system: %.1f MiB before, %.1f MiB after\n",
			mib(heap0), mib(heap1), mib(sys0), mib(sys1))
	}
	fmt.Printf("hostile: %d cases: %d ok, %d pending, %d failed\n", s.n[0]+s.n[1]+s.n[2], s.n[pass], s.n[pending], s.n[fail])
	if s.n[fail] > 0 {
		os.Exit(1)
	}
}

// heap scrapes go_memstats_heap_inuse_bytes and go_memstats_heap_sys_bytes
// (the most the heap has taken from the system) from the node's /metrics,
// or zeros without one. With metrics.pprof.enable, asking for a heap
// profile with gc=1 first has the node collect its garbage, so the first
// figure is what it holds on to.
func heap(addr string) (inuse, sys int64) {
	if addr == "" {
		return 0, 0
	}
	if resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), " ")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch {
		case err != nil:
		case name == "go_memstats_heap_inuse_bytes":
			inuse = int64(f)
		case name == "go_memstats_heap_sys_bytes":
			sys = int64(f)
		}
	}
	return inuse, sys
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
