package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/tlsconf"
)

// tlsFlags are the global --tls-* flags (and QUIRE_TLS_* variables).
type tlsFlags struct {
	ca, cert, key string
}

func (f *tlsFlags) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.ca, "tls-ca", os.Getenv("QUIRE_TLS_CA"),
		"PEM CA bundle the brokers' certificates must chain to; any --tls-* flag dials with TLS (also QUIRE_TLS_CA)")
	cmd.PersistentFlags().StringVar(&f.cert, "tls-cert", os.Getenv("QUIRE_TLS_CERT"),
		"PEM client certificate for mutual TLS, with --tls-key (also QUIRE_TLS_CERT)")
	cmd.PersistentFlags().StringVar(&f.key, "tls-key", os.Getenv("QUIRE_TLS_KEY"),
		"PEM key of --tls-cert (also QUIRE_TLS_KEY)")
}

func (f *tlsFlags) enabled() bool { return f.ca != "" || f.cert != "" || f.key != "" }

// credentials are the transport credentials the flags ask for: plaintext
// without any.
func (f *tlsFlags) credentials() (credentials.TransportCredentials, error) {
	if !f.enabled() {
		return insecure.NewCredentials(), nil
	}
	r, err := tlsconf.NewReloader(tlsconf.Files{CA: f.ca, Cert: f.cert, Key: f.key}, nil)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
	}
	return r.ClientCredentials(), nil
}

// clientOpts are the Go client options of the flags.
func (f *tlsFlags) clientOpts() ([]client.Opt, error) {
	if !f.enabled() {
		return nil, nil
	}
	o, err := client.TLSFiles(f.ca, f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
	}
	return []client.Opt{o}, nil
}
