package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func init() { registerCommand(newHealthCmd) }

// newHealthCmd is `quire health`: the node health check for containers
// (their images have no shell). It asks each address in --brokers for the
// gRPC health of the whole server, which is SERVING once the node has
// registered with the controller and hosts its replicas, and fails unless
// every one answers SERVING.
func newHealthCmd(g *globalFlags) *cobra.Command {
	var timeout, wait time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when every broker in --brokers is SERVING (registered and hosting its replicas)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, not %v", timeout)
			}
			addrs, err := brokerAddrs(g.brokers)
			if err != nil {
				return err
			}
			if wait < 0 {
				return fmt.Errorf("--wait must not be negative, not %v", wait)
			}
			ctx, cancel := cmdContext()
			defer cancel()
			deadline := time.Now().Add(wait)
			for {
				var errs []error
				var lines []string
				for _, addr := range addrs {
					st, err := checkHealth(ctx, g, addr, timeout)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", addr, err))
						continue
					}
					lines = append(lines, fmt.Sprintf("%s %s", addr, st))
					if st != healthpb.HealthCheckResponse_SERVING {
						errs = append(errs, fmt.Errorf("%s is %s", addr, st))
					}
				}
				if len(errs) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
					for _, l := range lines {
						fmt.Fprintln(cmd.OutOrStdout(), l)
					}
					return errors.Join(errs...)
				}
				select {
				case <-ctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for each broker's answer")
	cmd.Flags().DurationVar(&wait, "wait", 0, "keep asking until every broker serves or this long has passed (0: ask once)")
	return cmd
}

func checkHealth(ctx context.Context, g *globalFlags, addr string, timeout time.Duration) (healthpb.HealthCheckResponse_ServingStatus, error) {
	creds, err := g.tls.credentials()
	if err != nil {
		return 0, err
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return 0, err
	}
	return resp.Status, nil
}
