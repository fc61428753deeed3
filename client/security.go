package client

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/quirelog/quire/tlsconf"
)

// TLS dials brokers over TLS with cfg (its RootCAs checking the brokers'
// certificates, its Certificates the client's own for mutual TLS). The
// server name checked is each broker's host unless cfg.ServerName is set.
func TLS(cfg *tls.Config) Opt {
	c := cfg.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return DialOptions(grpc.WithTransportCredentials(credentials.NewTLS(c)))
}

// TLSFiles dials brokers over TLS with PEM files: caFile the CA bundle the
// brokers' certificates must chain to ("" for the system's roots), certFile
// and keyFile the client's certificate and key for mutual TLS (both or
// neither). The files are read again when they change, so a long-running
// client follows certificate rotation on its next connection.
func TLSFiles(caFile, certFile, keyFile string) (Opt, error) {
	r, err := tlsconf.NewReloader(tlsconf.Files{Cert: certFile, Key: keyFile, CA: caFile}, nil)
	if err != nil {
		return nil, err
	}
	return DialOptions(grpc.WithTransportCredentials(r.ClientCredentials())), nil
}
