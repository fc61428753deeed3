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
	// Salt512 and Iterations512 are the SCRAM-SHA-512 keys' own salt and
	// iteration count when that mechanism was set on its own (Kafka's
	// AlterUserScramCredentials: each mechanism its salt and
	// iterations); empty and 0 when the keys share Salt and Iterations.
	// A credential with no StoredKey has SCRAM-SHA-512 only.
	Salt512       []byte
	Iterations512 int
}

// Has256 and Has512 report which mechanisms the credential has keys for.
func (c Credential) Has256() bool { return len(c.StoredKey) > 0 }
func (c Credential) Has512() bool { return len(c.StoredKey512) > 0 }

// SaltIterations512 are the salt and iteration count of the SCRAM-SHA-512
// keys.
func (c Credential) SaltIterations512() ([]byte, int) {
	if len(c.Salt512) > 0 {
		return c.Salt512, c.Iterations512
	}
	return c.Salt, c.Iterations
}

// Merge is c with the keys of the mechanisms named (MechanismSHA256,
// MechanismSHA512) taken from from, each with its own salt and
// iterations, the others kept: what Kafka's AlterUserScramCredentials
// does to a user's credentials. No mechanism named takes from whole.
func (c Credential) Merge(from Credential, mechanisms []string) Credential {
	if len(mechanisms) == 0 {
		return from
	}
	out := c
	// The SCRAM-SHA-512 keys kept carry their own salt, which may be
	// about to change beneath them.
	if out.Has512() {
		out.Salt512, out.Iterations512 = out.SaltIterations512()
	}
	for _, m := range mechanisms {
		switch m {
		case MechanismSHA256:
			out.Salt, out.Iterations, out.StoredKey, out.ServerKey = from.Salt, from.Iterations, from.StoredKey, from.ServerKey
		case MechanismSHA512:
			out.Salt512, out.Iterations512 = from.SaltIterations512()
			out.StoredKey512, out.ServerKey512 = from.StoredKey512, from.ServerKey512
		}
	}
	if !out.Has256() {
		out.Salt, out.Iterations = nil, 0
	}
	if !out.Has512() {
		out.Salt512, out.Iterations512 = nil, 0
	} else if out.Has256() && string(out.Salt512) == string(out.Salt) && out.Iterations512 == out.Iterations {
		out.Salt512, out.Iterations512 = nil, 0
	}
	return out
}

// Without is c without the keys of mechanism; ok is false when c has
// none for it.
func (c Credential) Without(mechanism string) (Credential, bool) {
	out := c
	switch {
	case mechanism == MechanismSHA256 && c.Has256():
		if c.Has512() {
			out.Salt512, out.Iterations512 = c.SaltIterations512()
		}
		out.Salt, out.Iterations, out.StoredKey, out.ServerKey = nil, 0, nil, nil
	case mechanism == MechanismSHA512 && c.Has512():
		out.Salt512, out.Iterations512, out.StoredKey512, out.ServerKey512 = nil, 0, nil, nil
	default:
		return c, false
	}
	return out, true
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

// Validate checks a stored credential's shape: keys for one mechanism
// at least, each with a salt and iterations in range.
func (c Credential) Validate() error {
	if !c.Has256() && !c.Has512() {
		return fmt.Errorf("%w: no keys", ErrInvalidCredential)
	}
	if c.Has256() {
		switch {
		case len(c.Salt) == 0:
			return fmt.Errorf("%w: no salt", ErrInvalidCredential)
		case c.Iterations < MinIterations || c.Iterations > MaxIterations:
			return fmt.Errorf("%w: iterations %d outside %d..%d", ErrInvalidCredential, c.Iterations, MinIterations, MaxIterations)
		case len(c.StoredKey) != sha256.Size || len(c.ServerKey) != sha256.Size:
			return fmt.Errorf("%w: keys must be %d bytes", ErrInvalidCredential, sha256.Size)
		}
	}
	if c.Has512() {
		salt, iters := c.SaltIterations512()
		switch {
		case len(salt) == 0:
			return fmt.Errorf("%w: no SCRAM-SHA-512 salt", ErrInvalidCredential)
		case iters < MinIterations || iters > MaxIterations:
			return fmt.Errorf("%w: SCRAM-SHA-512 iterations %d outside %d..%d", ErrInvalidCredential, iters, MinIterations, MaxIterations)
		case len(c.StoredKey512) != sha512.Size || len(c.ServerKey512) != sha512.Size:
			return fmt.Errorf("%w: SCRAM-SHA-512 keys must be %d bytes", ErrInvalidCredential, sha512.Size)
		}
	}
	return nil
}

// Verify reports whether password is the one the credential was derived
// from, comparing in constant time.
func (c Credential) Verify(password string) bool {
	h, salt, iters, want := sha256.New, c.Salt, c.Iterations, c.StoredKey
	if !c.Has256() {
		// SCRAM-SHA-512 only (set through Kafka's API).
		salt, iters = c.SaltIterations512()
		h, want = sha512.New, c.StoredKey512
	}
	if password == "" || len(want) == 0 || iters < MinIterations || iters > MaxIterations {
		return false
	}
	stored, _, err := scramKeys(h, password, salt, iters)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(stored, want) == 1
}
