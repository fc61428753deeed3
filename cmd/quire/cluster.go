package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() { registerCommand(newClusterCmd) }

func newClusterCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster"}
	cmd.AddCommand(&cobra.Command{
		Use:   "info",
		Short: "Show the brokers, the controller, and each broker's partition replicas and budget",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			d, err := cl.DescribeCluster(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// Without an active controller the node answers from the
			// metadata it last applied: who is fenced cannot be told.
			unconfirmed := d.ControllerID < 0
			if g.format == "json" {
				if err := printJSON(out, clusterJSON(d)); err != nil {
					return err
				}
				return noControllerErr(unconfirmed)
			}
			controller := fmt.Sprint(d.ControllerID)
			if unconfirmed {
				controller = "none (no quorum)"
			}
			fmt.Fprintf(out, "CLUSTER     %s\nCONTROLLER  %s\n\n", d.ClusterID, controller)
			rows := [][]string{}
			for _, b := range d.Brokers {
				id := fmt.Sprint(b.ID)
				if b.ID == d.ControllerID {
					id += "*"
				}
				budget := "-" // unknown: not enforced
				if b.MaxPartitions > 0 {
					budget = fmt.Sprint(b.MaxPartitions)
				}
				fenced := yesNo(b.Fenced)
				if unconfirmed {
					fenced = "unknown"
				}
				rows = append(rows, []string{id, b.Address, b.Rack, yesNo(b.Controller), fenced, fmt.Sprint(b.Partitions), budget, yesNo(b.Cordoned)})
			}
			if err := printTable(out, []string{"ID", "ADDRESS", "RACK", "VOTER", "FENCED", "PARTITIONS", "MAX", "CORDONED"}, rows); err != nil {
				return err
			}
			return noControllerErr(unconfirmed)
		},
	})
	cmd.AddCommand(newFeaturesCmd(g))
	return cmd
}

// --- helpers shared by the client verbs ---

// cmdContext returns a context cancelled by SIGINT or SIGTERM.
func cmdContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// connect is the start of every client verb: a context cancelled by
// SIGINT/SIGTERM and a client for --brokers; done closes both.
func connect(g *globalFlags) (context.Context, *client.Client, func(), error) {
	ctx, cancel := cmdContext()
	cl, err := newClient(ctx, g)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

// newClient connects to the brokers named by --brokers.
func newClient(ctx context.Context, g *globalFlags, opts ...client.Opt) (*client.Client, error) {
	if g.format != "table" && g.format != "json" {
		return nil, fmt.Errorf("unknown --format %q (table or json)", g.format)
	}
	seeds, err := brokerAddrs(g.brokers)
	if err != nil {
		return nil, err
	}
	if g.scram.user != "" && !g.tls.enabled() {
		// grpc-go refuses per-call credentials on a plaintext connection
		// with a hint for Go programmers; the CLI's user needs the flag.
		return nil, fmt.Errorf("--user %s: SCRAM credentials are sent only over TLS: give --tls-ca with the CA of the brokers' certificates (or QUIRE_TLS_CA), and the brokers a TLS listener", g.scram.user)
	}
	base := []client.Opt{client.SeedBrokers(seeds...), client.ClientID("quire-cli"),
		client.RequestTimeout(15 * time.Second)}
	sec, err := g.tls.clientOpts()
	if err != nil {
		return nil, err
	}
	base = append(append(base, sec...), g.scram.clientOpts()...)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := client.New(dctx, append(base, opts...)...)
	if err != nil {
		for _, a := range seeds {
			if ctx.Err() == nil && speaksKafka(ctx, a) {
				return nil, fmt.Errorf("connect to %s: %s speaks Kafka's protocol, not Quire's gRPC API: point --brokers at a gRPC listener (the node's listeners setting; Kafka clients use the Kafka listener) (%w)", strings.Join(seeds, ","), a, err)
			}
		}
		if !g.tls.enabled() && strings.Contains(err.Error(), "server preface") {
			// What grpc-go says when a TLS listener drops a plaintext
			// connection.
			return nil, fmt.Errorf("connect to %s: %w (the broker closed a plaintext connection: if it requires TLS, give --tls-ca, or QUIRE_TLS_CA)", strings.Join(seeds, ","), err)
		}
		return nil, fmt.Errorf("connect to %s: %w", strings.Join(seeds, ","), err)
	}
	return cl, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func int32s(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// parseKV parses key=value pairs.
func parseKV(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad key=value %q", p)
		}
		m[k] = v
	}
	return m, nil
}

// parseAcks parses all|-1|1|0.
func parseAcks(s string) (client.Acks, error) {
	switch s {
	case "all", "-1":
		return client.AllISRAcks, nil
	case "1", "leader":
		return client.LeaderAck, nil
	case "0", "none":
		return client.NoAck, nil
	}
	return 0, fmt.Errorf("bad --acks %q (all, 1 or 0)", s)
}

// parseCodec parses a compression name.
func parseCodec(s string) (client.Codec, error) {
	switch s {
	case "", "none":
		return client.NoCompression, nil
	case "gzip":
		return client.GzipCompression, nil
	case "snappy":
		return client.SnappyCompression, nil
	case "lz4":
		return client.LZ4Compression, nil
	case "zstd":
		return client.ZstdCompression, nil
	}
	return 0, fmt.Errorf("unknown compression %q", s)
}
