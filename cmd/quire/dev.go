package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/tlsconf"
)

func init() { registerCommand(newDevCmd) }

func newDevCmd(_ *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "dev", Short: "Development helpers"}
	var out, nodes, clients, hosts string
	var keep bool
	certs := &cobra.Command{
		Use:   "certs",
		Short: "Make a throwaway CA with node and client certificates (for development and tests only)",
		Long: `Writes to --out: ca.pem and ca-key.pem (a new CA), and for each name of
--nodes and --clients NAME.pem and NAME-key.pem, subject CN=NAME,O=quire,
signed by the CA. Node certificates are valid for --hosts (and for
NAME itself) as servers and as clients; client certificates for clients
only. Keys are written readable by their owner only.

With --keep, a directory that already holds the CA and every named
certificate and key is left as it is (nothing is written), so running it
again, as a one-off container does on every start, does not replace the
CA that nodes and clients trust; a directory holding only some of them is
an error naming the missing files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if keep {
				done, err := devCertsPresent(out, splitList(nodes), splitList(clients))
				if err != nil {
					return err
				}
				if done {
					fmt.Fprintf(cmd.OutOrStdout(), "kept: %s already holds the CA and every certificate\n", out)
					return nil
				}
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
	certs.Flags().BoolVar(&keep, "keep", false, "leave --out as it is when it already holds the CA and every certificate")
	cmd.AddCommand(certs)
	return cmd
}

// devCertsPresent reports whether dir holds ca.pem, ca-key.pem and
// NAME.pem and NAME-key.pem for every name (true), or none of them
// (false); some but not all is an error naming the missing ones.
func devCertsPresent(dir string, names ...[]string) (bool, error) {
	files := []string{"ca.pem", "ca-key.pem"}
	for _, list := range names {
		for _, n := range list {
			files = append(files, n+".pem", n+"-key.pem")
		}
	}
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			if !os.IsNotExist(err) {
				return false, err
			}
			missing = append(missing, f)
		}
	}
	switch len(missing) {
	case 0:
		return true, nil
	case len(files):
		return false, nil
	}
	return false, fmt.Errorf("--keep: %s holds some of the files but not %s; new ones would need a new CA: empty the directory to start over",
		dir, strings.Join(missing, ", "))
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
