package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/tlsconf"
)

func init() { registerCommand(newDevCmd) }

func newDevCmd(_ *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "dev", Short: "Development helpers"}
	var out, nodes, clients, hosts string
	certs := &cobra.Command{
		Use:   "certs",
		Short: "Make a throwaway CA with node and client certificates (for development and tests only)",
		Long: `Writes to --out: ca.pem and ca-key.pem (a new CA), and for each name of
--nodes and --clients NAME.pem and NAME-key.pem, subject CN=NAME,O=quire,
signed by the CA. Node certificates are valid for --hosts (and for
NAME itself) as servers and as clients; client certificates for clients
only. Keys are written readable by their owner only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			ca, err := tlsconf.NewCA("quire-dev-ca")
			if err != nil {
				return err
			}
			if err := ca.WriteCA(out); err != nil {
				return err
			}
			hostList := splitList(hosts)
			for _, n := range splitList(nodes) {
				if _, err := ca.WriteFiles(out, n, n, append([]string{n}, hostList...)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node   %s: %s/%s.pem (principal User:CN=%s,O=quire)\n", n, out, n, n)
			}
			for _, n := range splitList(clients) {
				if _, err := ca.WriteFiles(out, n, n, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "client %s: %s/%s.pem (principal User:CN=%s,O=quire)\n", n, out, n, n)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ca: %s/ca.pem\n", out)
			return nil
		},
	}
	certs.Flags().StringVar(&out, "out", "", "directory to write the files to")
	certs.Flags().StringVar(&nodes, "nodes", "node-1", "comma-separated node certificate names")
	certs.Flags().StringVar(&clients, "clients", "admin", "comma-separated client certificate names")
	certs.Flags().StringVar(&hosts, "hosts", "localhost,127.0.0.1", "comma-separated host names and IPs every node certificate is valid for")
	cmd.AddCommand(certs)
	return cmd
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
