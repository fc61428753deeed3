package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is what Start needs.
type Config struct {
	// Addr is the host:port to listen on (metrics.listen).
	Addr string
	// Pprof serves /debug/pprof/ too (metrics.pprof.enable).
	Pprof  bool
	Source Source
	Logger hclog.Logger
}

// Server is the monitoring HTTP listener of one node.
type Server struct {
	srv    *http.Server
	lis    net.Listener
	logger hclog.Logger
	done   chan struct{}
	once   sync.Once
	err    error
}

// Start listens on cfg.Addr and serves until Close:
//
//	/metrics       the node's series, Go runtime and process collectors
//	/healthz       200 while the process runs
//	/readyz        200 when Source.Ready is nil, else 503 and the reason
//	/debug/pprof/  when cfg.Pprof
//
// Every node has its own registry, so that nodes sharing a process (tests)
// each expose their own series.
func Start(cfg Config) (*Server, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(cfg.Source)); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	raft, err := raftCollector()
	if err != nil {
		return nil, fmt.Errorf("metrics: raft's go-metrics: %w", err)
	}
	if err := reg.Register(raft); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: errorLog{cfg.Logger}}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := cfg.Source.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, err.Error())
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s (metrics.listen): %w", cfg.Addr, err)
	}
	s := &Server{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		lis:    lis,
		logger: cfg.Logger,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("metrics listener stopped", "error", err)
		}
	}()
	return s, nil
}

// Addr is the address listened on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the listener: open scrapes finish within ctx, then are cut.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		err := s.srv.Shutdown(ctx)
		if err != nil {
			_ = s.srv.Close()
		}
		<-s.done
		if err != nil {
			s.err = fmt.Errorf("metrics: stop listener: %w", err)
		}
	})
	return s.err
}

// errorLog sends promhttp's errors to the node's logger.
type errorLog struct{ l hclog.Logger }

func (e errorLog) Println(v ...any) { e.l.Error("metrics scrape failed", "error", fmt.Sprint(v...)) }
