package auth

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"hash"
	"testing"
)

// salted is Hi(password, salt, iterations), what a Kafka client sends in
// AlterUserScramCredentials.
func salted(t *testing.T, h func() hash.Hash, password string, salt []byte, iterations int) []byte {
	t.Helper()
	k, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAuthSCRAMPerMechanism: each mechanism's credential set from a
// salted password has the keys its password derives with its own salt
// and iterations; merged into a user's, it replaces that mechanism only;
// removed, it leaves the other; a credential of SCRAM-SHA-512 alone
// verifies its password.
func TestAuthSCRAMPerMechanism(t *testing.T) {
	s256, s512 := []byte("salt-of-sha-256!"), []byte("salt-of-sha-512!")
	c256, err := CredentialFromSalted(MechanismSHA256, s256, salted(t, sha256.New, "pw-256", s256, 8192), 8192)
	if err != nil {
		t.Fatal(err)
	}
	c512, err := CredentialFromSalted(MechanismSHA512, s512, salted(t, sha512.New, "pw-512", s512, 4096), 4096)
	if err != nil {
		t.Fatal(err)
	}
	want256, _ := DeriveCredential("pw-256", s256, 8192)
	want512, _ := DeriveCredential("pw-512", s512, 4096)
	if string(c256.StoredKey) != string(want256.StoredKey) || string(c256.ServerKey) != string(want256.ServerKey) || c256.Has512() {
		t.Fatal("the SCRAM-SHA-256 credential from a salted password differs from the password's")
	}
	if string(c512.StoredKey512) != string(want512.StoredKey512) || string(c512.ServerKey512) != string(want512.ServerKey512) || c512.Has256() {
		t.Fatal("the SCRAM-SHA-512 credential from a salted password differs from the password's")
	}
	if !c512.Verify("pw-512") || c512.Verify("pw-256") {
		t.Fatal("a SCRAM-SHA-512-only credential does not verify its password alone")
	}
	if _, err := CredentialFromSalted(MechanismSHA512, s512, make([]byte, 32), 4096); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("a 32-byte SCRAM-SHA-512 salted password: %v", err)
	}
	if _, err := CredentialFromSalted("SCRAM-SHA-1", s512, make([]byte, 20), 4096); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("SCRAM-SHA-1: %v", err)
	}

	// A password's credential (both mechanisms, one salt), then each
	// mechanism replaced on its own.
	pw, _ := DeriveCredential("pw", []byte("the password's salt"), 4096)
	m := pw.Merge(c512, []string{MechanismSHA512})
	if string(m.StoredKey) != string(pw.StoredKey) || string(m.StoredKey512) != string(c512.StoredKey512) {
		t.Fatal("merging SCRAM-SHA-512 touched SCRAM-SHA-256 or did not set SCRAM-SHA-512")
	}
	if salt, it := m.SaltIterations512(); string(salt) != string(s512) || it != 4096 || m.Iterations != 4096 || string(m.Salt) != string(pw.Salt) {
		t.Fatalf("salts and iterations after merging SCRAM-SHA-512: %q %d, %q %d", salt, it, m.Salt, m.Iterations)
	}
	m = pw.Merge(c256, []string{MechanismSHA256})
	if salt, it := m.SaltIterations512(); string(salt) != string(pw.Salt) || it != 4096 || string(m.StoredKey512) != string(pw.StoredKey512) {
		t.Fatal("merging SCRAM-SHA-256 lost the SCRAM-SHA-512 keys' salt")
	}
	if string(m.Salt) != string(s256) || m.Iterations != 8192 || !m.Verify("pw-256") {
		t.Fatal("merging SCRAM-SHA-256 did not set it")
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	rest, ok := m.Without(MechanismSHA256)
	if !ok || rest.Has256() || !rest.Has512() || rest.Validate() != nil || !rest.Verify("pw") {
		t.Fatal("without SCRAM-SHA-256 the SCRAM-SHA-512 keys do not verify the password they came from")
	}
	if _, ok := rest.Without(MechanismSHA256); ok {
		t.Fatal("removed SCRAM-SHA-256 twice")
	}
	if none, _ := rest.Without(MechanismSHA512); none.Validate() == nil {
		t.Fatal("a credential with no keys validates")
	}
}
