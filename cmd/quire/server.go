package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/quirelog/quire/broker"
)

func init() { registerCommand(newServerCmd) }

// serverFlags are the flags of `quire server`.
type serverFlags struct {
	dev        bool
	configFile string
	dataDir    string
	sets       []string
	logJSON    bool
}

func newServerCmd(_ *globalFlags) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Quire node (broker and controller)",
		Long: `Run a Quire node. With --dev it needs nothing else: data in ./quire-data
(or --data-dir), listening on 127.0.0.1:9092, topics created on first use.

Configuration is read from the defaults, then --config FILE (YAML, flat
key: value), then QUIRE_* environment variables, then --data-dir and --set.

` + broker.ConfigHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.dev, "dev", false, "single-node development defaults: ./quire-data, 127.0.0.1:9092, auto-create topics")
	fl.StringVar(&f.configFile, "config", "", "YAML config file of Kafka-style keys")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory (same as --set log.dirs=DIR)")
	fl.StringArrayVar(&f.sets, "set", nil, "set a config key, key=value (repeatable)")
	fl.BoolVar(&f.logJSON, "log-json", false, "write logs as JSON")
	return cmd
}

// serverConfig builds the node config from flags, file and environment.
func serverConfig(f *serverFlags, lookupEnv func(string) (string, bool)) (broker.Config, error) {
	cfg := broker.DefaultConfig()
	if f.dev {
		cwd, err := os.Getwd()
		if err != nil {
			return cfg, err
		}
		cfg = broker.DevConfig(filepath.Join(cwd, "quire-data"))
	}
	if f.configFile != "" {
		if err := cfg.LoadFile(f.configFile); err != nil {
			return cfg, err
		}
	}
	if err := cfg.LoadEnv(lookupEnv); err != nil {
		return cfg, err
	}
	if f.dataDir != "" {
		if err := cfg.Set("log.dirs", f.dataDir); err != nil {
			return cfg, err
		}
	}
	for _, kv := range f.sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, fmt.Errorf("--set %q: want key=value", kv)
		}
		if err := cfg.Set(strings.TrimSpace(k), v); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}

func runServer(ctx context.Context, f *serverFlags) error {
	cfg, err := serverConfig(f, os.LookupEnv)
	if err != nil {
		return err
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{
		Name:       "quire",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: f.logJSON,
	})
	for _, hook := range serverHooks {
		hook(&cfg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := broker.New(cfg)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if serr := b.Shutdown(sctx); serr != nil {
			cfg.Logger.Warn("shutdown after a failed start", "error", serr)
		}
		return err
	}
	<-ctx.Done()
	stop() // a second signal kills the process
	cfg.Logger.Info("signal received, shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return b.Shutdown(sctx)
}

// serverHooks change a server's configuration just before it starts.
// Only test builds have any (diskfault_chaosfs.go, clockjump_chaosfs.go).
var serverHooks []func(*broker.Config)

// shutdownTimeout bounds a node's shutdown: in-flight calls past it are
// cut off (the controlled shutdown inside it is bounded by
// broker.session.timeout.ms).
const shutdownTimeout = 30 * time.Second
