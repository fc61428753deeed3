package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/quirelog/quire/console"
)

func init() { registerCommand(newConsoleCmd) }

func newConsoleCmd(g *globalFlags) *cobra.Command {
	var listen, logLevel string
	var tailMax time.Duration
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console for the cluster at --brokers",
		Long: `Serves a web UI on --listen: brokers and partitions (under-replicated and
offline ones highlighted), topics with each partition's leader, replicas,
ISR and offsets, consumer groups with their lag, a live tail of a topic, and
actions behind a confirmation (create and delete a topic, add partitions,
delete a topic's records below an offset or its high watermark, reset an
empty group's offsets). It uses only the public gRPC API, so any node will
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
			c, err := console.New(console.Config{Brokers: brokers, Logger: log, TailStreamMax: tailMax})
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
	cmd.Flags().DurationVar(&tailMax, "tail-stream-max", 5*time.Minute,
		"longest a live tail's event stream lasts before the page reconnects (and goes on where it was)")
	level := os.Getenv("QUIRE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	cmd.Flags().StringVar(&logLevel, "log-level", level, "log level: trace, debug, info, warn or error; also QUIRE_LOG_LEVEL")
	return cmd
}
