package auth

import (
	"crypto/sha256"
	"fmt"
)

// CredentialFromSalted is the credential of a salted password a client
// derived itself (Hi(password, salt, iterations) in RFC 5802's terms),
// as Kafka's AlterUserScramCredentials sends it: the server never sees
// the password.
func CredentialFromSalted(salt, salted []byte, iterations int) (Credential, error) {
	if len(salted) != sha256.Size {
		return Credential{}, fmt.Errorf("%w: a SCRAM-SHA-256 salted password is %d bytes, got %d", ErrInvalidCredential, sha256.Size, len(salted))
	}
	clientKey := hmacOf(sha256.New, salted, []byte("Client Key"))
	stored := sha256.Sum256(clientKey)
	c := Credential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: stored[:], ServerKey: hmacOf(sha256.New, salted, []byte("Server Key"))}
	if err := c.Validate(); err != nil {
		return Credential{}, err
	}
	return c, nil
}
