package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority for development and tests (`quire
// dev certs`): an ECDSA P-256 key and a self-signed certificate, issuing
// certificates for nodes and clients. Production clusters use their own PKI.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// devValidity is how long dev certificates are valid.
const devValidity = 365 * 24 * time.Hour

// NewCA makes a CA whose subject is CN=name,O=quire.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"quire"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(devValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Issue makes a certificate with subject CN=cn,O=quire signed by the CA,
// valid for the given host names and IP addresses (a server certificate
// when there are any) and for client authentication. It returns the
// certificate and key in PEM.
func (ca *CA) Issue(cn string, hosts []string) (certPEM, keyPEM []byte, err error) {
	if cn == "" {
		return nil, nil, errors.New("tlsconf: a certificate needs a common name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"quire"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(devValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// WriteFiles issues a certificate for cn and writes it to dir as
// NAME.pem and NAME-key.pem (the key readable by its owner only),
// returning their Files with the CA's certificate as CA (ca.pem in dir,
// written by WriteCA).
func (ca *CA) WriteFiles(dir, name, cn string, hosts []string) (Files, error) {
	certPEM, keyPEM, err := ca.Issue(cn, hosts)
	if err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	if err := writeAtomic(f.Key, keyPEM, 0o600); err != nil {
		return Files{}, err
	}
	if err := writeAtomic(f.Cert, certPEM, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// WriteCA writes the CA's certificate to dir/ca.pem and its key to
// dir/ca-key.pem.
func (ca *CA) WriteCA(dir string) error {
	if err := writeAtomic(filepath.Join(dir, "ca-key.pem"), ca.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "ca.pem"), ca.CertPEM, 0o644)
}

// writeAtomic replaces name by a complete file (a reader never sees half
// a certificate).
func writeAtomic(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("tlsconf: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("tlsconf: %w", err)
	}
	return nil
}
