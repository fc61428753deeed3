package metrics

import (
	"sync"

	gometrics "github.com/armon/go-metrics"
	gmprometheus "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// The metadata quorum's own metrics: hashicorp/raft (and raft-boltdb)
// report through go-metrics' process-wide global (github.com/hashicorp/
// go-metrics/compat, which forwards to github.com/armon/go-metrics unless
// built with the hashicorpmetrics tag), so they are turned into series by
// that library's Prometheus sink, installed as the global once, by the
// first metrics listener of the process. Until then raft reports to
// go-metrics' default, which drops everything: a node with no listener
// pays nothing. The series are the process's (all nodes of an in-process
// test cluster together), named quire_raft_*: timers are summaries in
// milliseconds (quire_raft_commitTime, quire_raft_fsm_apply,
// quire_raft_leader_lastContact, ...), state changes counters
// (quire_raft_state_leader, ...).

var raftSink struct {
	once sync.Once
	sink *gmprometheus.PrometheusSink
	err  error
}

// raftCollector returns the process's go-metrics sink, installing it on
// first use.
func raftCollector() (prometheus.Collector, error) {
	raftSink.once.Do(func() {
		// The sink registers itself somewhere; each node's registry
		// registers it again.
		sink, err := gmprometheus.NewPrometheusSinkFrom(gmprometheus.PrometheusOpts{
			Registerer: prometheus.NewRegistry(),
			Name:       "quire_raft_go_metrics",
		})
		if err != nil {
			raftSink.err = err
			return
		}
		cfg := gometrics.DefaultConfig("quire")
		cfg.EnableHostname = false       // no host name inside series names
		cfg.EnableRuntimeMetrics = false // the Go collector has them
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			raftSink.err = err
			return
		}
		raftSink.sink = sink
	})
	return raftSink.sink, raftSink.err
}
