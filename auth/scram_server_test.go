package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"strings"
	"testing"
)

// RFC 7677 section 3's example exchange, byte for byte: user "user",
// password "pencil".
func TestAuthScramServerRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := DeriveCredential("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(u string) (Credential, bool) { return cred, u == "user" }
	s, err := NewScramServer(MechanismSHA256, lookup)
	if err != nil {
		t.Fatal(err)
	}
	s.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	first, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("first: done %v, err %v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first-message %q, want %q", first, want)
	}
	final, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("final: done %v, err %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final-message %q, want %q", final, want)
	}
	if s.User() != "user" || !s.Done() {
		t.Fatalf("user %q done %v", s.User(), s.Done())
	}
	if _, _, err := s.Step([]byte("more")); !errors.Is(err, ErrSCRAM) {
		t.Fatalf("a step after the end: %v", err)
	}
}

// scramClient is the client side of an exchange, written from RFC 5802
// for these tests.
func scramClient(t *testing.T, s *ScramServer, h func() hash.Hash, user, password string) ([]byte, error) {
	t.Helper()
	bare := "n=" + strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user) + ",r=clientnonce"
	first, _, err := s.Step([]byte("n,," + bare))
	if err != nil {
		return nil, err
	}
	attrs, err := scramAttrs(string(first))
	if err != nil || len(attrs) != 3 {
		t.Fatalf("server-first-message %q: %v", first, err)
	}
	nonce := attrs[0].value
	if !strings.HasPrefix(nonce, "clientnonce") || len(nonce) <= len("clientnonce") {
		t.Fatalf("server nonce %q does not extend the client's", nonce)
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs[1].value)
	var iters int
	for _, c := range attrs[2].value {
		iters = iters*10 + int(c-'0')
	}
	salted, err := pbkdf2.Key(h, password, salt, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	withoutProof := "c=biws,r=" + nonce
	authMessage := bare + "," + string(first) + "," + withoutProof
	sig := hmacOf(h, hashOf(h, clientKey), []byte(authMessage))
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	final, done, err := s.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err != nil {
		return nil, err
	}
	if !done {
		t.Fatal("not done after a good proof")
	}
	want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, hmacOf(h, salted, []byte("Server Key")), []byte(authMessage)))
	if !hmac.Equal(final, []byte(want)) {
		t.Fatalf("server signature %q, want %q", final, want)
	}
	return final, nil
}

func TestAuthScramServerMechanisms(t *testing.T) {
	cred, err := NewCredential("s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	old := cred
	old.StoredKey512, old.ServerKey512 = nil, nil
	users := map[string]Credential{"alice": cred, "a,b=c": cred, "old": old}
	lookup := func(u string) (Credential, bool) { c, ok := users[u]; return c, ok }
	for _, tc := range []struct {
		mech           string
		h              func() hash.Hash
		user, password string
		ok             bool
	}{
		{MechanismSHA256, sha256.New, "alice", "s3cret", true},
		{MechanismSHA512, sha512.New, "alice", "s3cret", true},
		{MechanismSHA256, sha256.New, "a,b=c", "s3cret", true}, // escaped name
		{MechanismSHA256, sha256.New, "alice", "wrong", false},
		{MechanismSHA512, sha512.New, "alice", "wrong", false},
		{MechanismSHA256, sha256.New, "nobody", "s3cret", false},
		{MechanismSHA256, sha256.New, "old", "s3cret", true},
		{MechanismSHA512, sha512.New, "old", "s3cret", false}, // no SHA-512 keys stored
	} {
		s, err := NewScramServer(tc.mech, lookup)
		if err != nil {
			t.Fatal(err)
		}
		_, err = scramClient(t, s, tc.h, tc.user, tc.password)
		if tc.ok != (err == nil) {
			t.Errorf("%s %s/%s: err %v, want ok=%v", tc.mech, tc.user, tc.password, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrSCRAM) || !strings.Contains(err.Error(), "invalid credentials")) {
			t.Errorf("%s %s: error %v does not say invalid credentials", tc.mech, tc.user, err)
		}
		if tc.ok && (s.User() != tc.user || !s.Done()) {
			t.Errorf("%s: user %q done %v", tc.mech, s.User(), s.Done())
		}
	}
}

// An unknown user gets a salt and iteration count as a known one does,
// the same on each attempt.
func TestAuthScramServerUnknownUser(t *testing.T) {
	lookup := func(string) (Credential, bool) { return Credential{}, false }
	var firsts []string
	for range 2 {
		s, _ := NewScramServer(MechanismSHA256, lookup)
		s.nonce = func() string { return "server" }
		first, _, err := s.Step([]byte("n,,n=ghost,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, string(first))
	}
	if firsts[0] != firsts[1] || !strings.Contains(firsts[0], ",i=8192") {
		t.Fatalf("unknown user's server-first-messages %q", firsts)
	}
}

func TestAuthScramServerMalformed(t *testing.T) {
	cred, _ := NewCredential("pw", MinIterations)
	lookup := func(string) (Credential, bool) { return cred, true }
	if _, err := NewScramServer("SCRAM-SHA-1", lookup); err == nil {
		t.Fatal("SCRAM-SHA-1 accepted")
	}
	for _, tc := range []struct{ first, final, want string }{
		{"", "", "no GS2 header"},
		{"p=tls-unique,,n=u,r=x", "", "channel binding"},
		{"x,,n=u,r=x", "", "flag"},
		{"n,,r=x,n=u", "", "must start n=USER,r=NONCE"},
		{"n,,n=u=20,r=x", "", "bad escape"},
		{"n,a=v,n=u,r=x", "", "not the user"},
		{"n,,n=u,r=x,tokenauth=true", "", "delegation tokens"},
		{"n,,n=u,r=", "", "empty client nonce"},
		{"n,,n=u,r=x", "c=biws,r=x", "no proof"},
		{"n,,n=u,r=x", "c=eSws,r=xS,p=AAAA", "does not repeat the GS2 header"},
		{"n,,n=u,r=x", "c=biws,r=other,p=AAAA", "not the one the server sent"},
		{"n,,n=u,r=x", "c=biws,r=yxS,p=AAAA", "not the one the server sent"},
		{"n,,n=u,r=x", "c=biws,r=xxS,p=AAAA", "not 32 bytes"}, // librdkafka's nonce is accepted
		{"n,,n=u,r=x", "c=biws,r=xS,p=AAAA", "not 32 bytes"},
	} {
		s, _ := NewScramServer(MechanismSHA256, lookup)
		s.nonce = func() string { return "S" }
		_, _, err := s.Step([]byte(tc.first))
		if tc.final != "" {
			if err != nil {
				t.Fatalf("%q: %v", tc.first, err)
			}
			_, _, err = s.Step([]byte(tc.final))
		}
		if !errors.Is(err, ErrSCRAM) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q / %q: error %v, want one saying %q", tc.first, tc.final, err, tc.want)
		}
	}
}
