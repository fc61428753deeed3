package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/console"
)

func init() { registerCommand(newConsoleCmd) }

func newConsoleCmd(g *globalFlags) *cobra.Command {
	var listen, logLevel, metricsList string
	var tailMax, sample, refresh, reqTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console for the cluster at --brokers",
		Long: `Serves a web UI on --listen: brokers and partitions (under-replicated and
offline ones highlighted), topics with each partition's leader, replicas,
ISR and offsets, a message browser (by partition, offset, timestamp, key,
header or value), consumer groups with their lag, a live tail of a topic,
throughput per topic and per broker, users and ACLs, and actions behind a
confirmation (produce a record, create and delete a topic, add partitions,
edit a topic's configs, delete a topic's records below an offset or its
high watermark, reset an empty group's offsets).

With --tls-ca (and --tls-cert/--tls-key, --user) it dials a secured cluster
as every other verb does. With --metrics (the brokers' metrics.listen
addresses, each as ID=host:port) it shows bytes in and out and records
out too. It uses only the public gRPC API, so any node will
do; the cluster need not be up when it starts: while it cannot be reached
every page says "cannot reach the cluster at ..." and shows the last view
it had, marked stale, with no health claims.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			brokers, err := brokerAddrs(g.brokers)
			if err != nil {
				return err
			}
			log := hclog.New(&hclog.LoggerOptions{Name: "console", Level: hclog.LevelFromString(logLevel), Output: cmd.ErrOrStderr()})
			cfg := console.Config{Brokers: brokers, Logger: log, TailStreamMax: tailMax, SampleInterval: sample,
				RefreshInterval: refresh, RequestTimeout: reqTimeout}
			if cfg.MetricsURLs, err = metricsTargets(metricsList); err != nil {
				return err
			}
			if g.tls.enabled() {
				if cfg.Transport, err = g.tls.credentials(); err != nil {
					return err
				}
			}
			if g.scram.user != "" {
				if !g.tls.enabled() {
					return fmt.Errorf("--user %s: SCRAM credentials are sent only over TLS: give --tls-ca with the CA of the brokers' certificates (or QUIRE_TLS_CA), and the brokers a TLS listener", g.scram.user)
				}
				cfg.Auth = client.SCRAMCredentials(g.scram.user, g.scram.passwordOrEnv())
			}
			c, err := console.New(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("console: listen on %s: %w", listen, err)
			}
			srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
			ctx, cancel := cmdContext()
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(lis) }()
			log.Info("console serving", "url", "http://"+lis.Addr().String()+"/", "brokers", g.brokers)
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			log.Info("signal received, shutting down")
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			// Tail streams end when the console closes; Shutdown waits for
			// them no longer than its deadline.
			c.Close()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve the console on (host:port)")
	cmd.Flags().StringVar(&metricsList, "metrics", "",
		"the brokers' metrics listeners, comma-separated ID=host:port (or host:port, or a URL): bytes in and out, records out")
	cmd.Flags().DurationVar(&sample, "sample-interval", 15*time.Second,
		"how often the console samples throughput and every group's lag for its charts")
	cmd.Flags().DurationVar(&reqTimeout, "request-timeout", 10*time.Second,
		"longest a page waits for the cluster before it says the cluster cannot be reached")
	cmd.Flags().DurationVar(&refresh, "refresh", 5*time.Second, "how often an open page refreshes its figures in place")
	cmd.Flags().DurationVar(&tailMax, "tail-stream-max", 5*time.Minute,
		"longest a live tail's event stream lasts before the page reconnects (and goes on where it was)")
	level := os.Getenv("QUIRE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	cmd.Flags().StringVar(&logLevel, "log-level", level, "log level: trace, debug, info, warn or error; also QUIRE_LOG_LEVEL")
	return cmd
}

// metricsTargets parses --metrics: ID=host:port, host:port or a URL, each
// a broker's metrics listener (its /metrics).
func metricsTargets(list string) ([]console.MetricsTarget, error) {
	var out []console.MetricsTarget
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var t console.MetricsTarget
		if id, addr, ok := strings.Cut(f, "="); ok {
			if n, err := strconv.Atoi(id); err != nil || n < 0 {
				return nil, fmt.Errorf("--metrics %q: %q is not a broker id (want ID=host:port)", f, id)
			}
			t.Broker, f = id, addr
		}
		if !strings.Contains(f, "://") {
			if _, _, err := net.SplitHostPort(f); err != nil {
				return nil, fmt.Errorf("--metrics %q: want host:port or a URL (%v)", f, err)
			}
			f = "http://" + f + "/metrics"
		}
		u, err := url.Parse(f)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("--metrics %q: not an http(s) URL", f)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/metrics"
		}
		t.URL = u.String()
		out = append(out, t)
	}
	return out, nil
}
