package auth

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// CredentialFromSalted is the credential of one mechanism
// (MechanismSHA256 or MechanismSHA512) from a salted password a client
// derived itself (Hi(password, salt, iterations) in RFC 5802's terms),
// as Kafka's AlterUserScramCredentials sends it: the server never sees
// the password, so the credential has that mechanism's keys only (merge
// it into the user's with Merge).
func CredentialFromSalted(mechanism string, salt, salted []byte, iterations int) (Credential, error) {
	var h func() hash.Hash
	switch mechanism {
	case MechanismSHA256:
		h = sha256.New
	case MechanismSHA512:
		h = sha512.New
	default:
		return Credential{}, fmt.Errorf("%w: mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", ErrInvalidCredential, mechanism)
	}
	if size := h().Size(); len(salted) != size {
		return Credential{}, fmt.Errorf("%w: a %s salted password is %d bytes, got %d", ErrInvalidCredential, mechanism, size, len(salted))
	}
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	stored := hashOf(h, clientKey)
	server := hmacOf(h, salted, []byte("Server Key"))
	var c Credential
	if mechanism == MechanismSHA256 {
		c = Credential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: stored, ServerKey: server}
	} else {
		c = Credential{Salt512: append([]byte(nil), salt...), Iterations512: iterations, StoredKey512: stored, ServerKey512: server}
	}
	if err := c.Validate(); err != nil {
		return Credential{}, err
	}
	return c, nil
}
