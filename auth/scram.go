package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// SCRAM-SHA-256 credentials (RFC 5802, RFC 7677), as Kafka stores them:
// the salt, the iteration count and StoredKey and ServerKey derived from
// the password; never the password. A caller proves its password by
// sending it (over TLS) for the broker to derive StoredKey again.

// Mechanism is the one SCRAM mechanism supported.
const Mechanism = "SCRAM-SHA-256"

// Iteration limits: Kafka's minimum, and a ceiling that keeps a
// verification within milliseconds.
const (
	MinIterations     = 4096
	MaxIterations     = 1 << 16
	DefaultIterations = 8192
	saltBytes         = 16
)

// ErrInvalidCredential is a credential or password that cannot be used.
var ErrInvalidCredential = errors.New("auth: invalid credential")

// Credential is one user's stored SCRAM credential.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
	// StoredKey512 and ServerKey512 are the SCRAM-SHA-512 keys of the
	// same password, salt and iteration count, for Kafka clients that
	// authenticate with that mechanism (ScramServer); empty in a
	// credential stored before they were derived.
	StoredKey512 []byte
	ServerKey512 []byte
}

// NewCredential derives a credential for password with a fresh random salt.
func NewCredential(password string, iterations int) (Credential, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	return DeriveCredential(password, salt, iterations)
}

// DeriveCredential derives the credential of password with salt.
func DeriveCredential(password string, salt []byte, iterations int) (Credential, error) {
	if password == "" {
		return Credential{}, fmt.Errorf("%w: empty password", ErrInvalidCredential)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: iterations %d outside %d..%d", ErrInvalidCredential, iterations, MinIterations, MaxIterations)
	}
	stored, server, err := scramKeys(sha256.New, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	stored512, server512, err := scramKeys(sha512.New, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: stored, ServerKey: server,
		StoredKey512: stored512, ServerKey512: server512}, nil
}

// scramKeys derives StoredKey and ServerKey of a password with the hash
// h (RFC 5802 section 3).
func scramKeys(h func() hash.Hash, password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidCredential, err)
	}
	return hashOf(h, hmacOf(h, salted, []byte("Client Key"))), hmacOf(h, salted, []byte("Server Key")), nil
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

func hashOf(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}

// Validate checks a stored credential's shape.
func (c Credential) Validate() error {
	switch {
	case len(c.Salt) == 0:
		return fmt.Errorf("%w: no salt", ErrInvalidCredential)
	case c.Iterations < MinIterations || c.Iterations > MaxIterations:
		return fmt.Errorf("%w: iterations %d outside %d..%d", ErrInvalidCredential, c.Iterations, MinIterations, MaxIterations)
	case len(c.StoredKey) != sha256.Size || len(c.ServerKey) != sha256.Size:
		return fmt.Errorf("%w: keys must be %d bytes", ErrInvalidCredential, sha256.Size)
	}
	return nil
}

// Verify reports whether password is the one the credential was derived
// from, comparing in constant time.
func (c Credential) Verify(password string) bool {
	if password == "" || c.Iterations < MinIterations || c.Iterations > MaxIterations {
		return false
	}
	stored, _, err := scramKeys(sha256.New, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(stored, c.StoredKey) == 1
}
