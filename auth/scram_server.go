package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// The server side of a SCRAM exchange (RFC 5802, with the SHA-256 and
// SHA-512 hashes of RFC 7677), for clients that prove a password without
// sending it, as Kafka's clients do over SASL. The exchange is checked
// against the stored credential alone: the client's proof, XORed with
// HMAC(StoredKey, AuthMessage), must hash to StoredKey, and the server
// proves itself with HMAC(ServerKey, AuthMessage). Channel binding is not
// offered (no -PLUS mechanism).

// The SCRAM mechanisms, by their SASL names.
const (
	MechanismSHA256 = Mechanism
	MechanismSHA512 = "SCRAM-SHA-512"
)

// ErrSCRAM is a SCRAM exchange that failed: a malformed message, or
// credentials that do not match (the error does not say whether the user
// exists).
var ErrSCRAM = errors.New("auth: SCRAM authentication failed")

// scramState is where an exchange stands.
type scramState int

const (
	scramFirst scramState = iota // waiting for client-first-message
	scramFinal                   // waiting for client-final-message
	scramDone                    // authenticated
	scramFailed
)

// ScramServer is one SCRAM exchange, server side: Step takes the
// client-first-message, then the client-final-message. It is not safe for
// concurrent use.
type ScramServer struct {
	mechanism string
	h         func() hash.Hash
	lookup    func(user string) (Credential, bool)
	// nonce makes the server's part of the nonce; a test sets it.
	nonce func() string

	state       scramState
	user        string
	gs2Header   string
	clientNonce string
	nonceAll    string
	authMessage string
	storedKey   []byte
	serverKey   []byte
}

// NewScramServer starts an exchange for mechanism (SCRAM-SHA-256 or
// SCRAM-SHA-512) against the credentials lookup returns.
func NewScramServer(mechanism string, lookup func(user string) (Credential, bool)) (*ScramServer, error) {
	var h func() hash.Hash
	switch mechanism {
	case MechanismSHA256:
		h = sha256.New
	case MechanismSHA512:
		h = sha512.New
	default:
		return nil, fmt.Errorf("%w: mechanism %q (want %s or %s)", ErrSCRAM, mechanism, MechanismSHA256, MechanismSHA512)
	}
	return &ScramServer{mechanism: mechanism, h: h, lookup: lookup, nonce: randomNonce}, nil
}

// User is the user of the exchange, once the client-first-message named
// it; authenticated only once Step reported done.
func (s *ScramServer) User() string { return s.user }

// Done reports whether the client is authenticated.
func (s *ScramServer) Done() bool { return s.state == scramDone }

// Step takes the client's next message and returns the server's answer;
// done is true with the server-final-message, once the client has proved
// its password. After an error the exchange is over.
func (s *ScramServer) Step(msg []byte) (answer []byte, done bool, err error) {
	switch s.state {
	case scramFirst:
		answer, err = s.first(string(msg))
	case scramFinal:
		answer, err = s.final(string(msg))
		done = err == nil
	default:
		err = fmt.Errorf("%w: the exchange is over", ErrSCRAM)
	}
	if err != nil {
		s.state = scramFailed
		return nil, false, err
	}
	return answer, done, nil
}

// first parses client-first-message = gs2-header client-first-message-bare
// and answers server-first-message.
func (s *ScramServer) first(msg string) ([]byte, error) {
	// gs2-header: cbind flag, optional authzid, each followed by a comma.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: client-first-message %q has no GS2 header", ErrSCRAM, truncate(msg))
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: channel binding (%s) is not supported; use %s without -PLUS", ErrSCRAM, flag, s.mechanism)
	default:
		return nil, fmt.Errorf("%w: bad GS2 channel binding flag %q", ErrSCRAM, flag)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: client-first-message %q has no GS2 header", ErrSCRAM, truncate(msg))
	}
	s.gs2Header = flag + "," + authzid + ","
	attrs, err := scramAttrs(bare)
	if err != nil {
		return nil, err
	}
	if len(attrs) < 2 || attrs[0].key != 'n' || attrs[1].key != 'r' {
		return nil, fmt.Errorf("%w: client-first-message must start n=USER,r=NONCE", ErrSCRAM)
	}
	user, err := saslName(attrs[0].value)
	if err != nil {
		return nil, err
	}
	if user == "" {
		return nil, fmt.Errorf("%w: empty user name", ErrSCRAM)
	}
	if authzid != "" {
		if !strings.HasPrefix(authzid, "a=") {
			return nil, fmt.Errorf("%w: bad authorization identity %q", ErrSCRAM, authzid)
		}
		if z, err := saslName(authzid[2:]); err != nil || z != user {
			return nil, fmt.Errorf("%w: authorization identity %q is not the user %q", ErrSCRAM, authzid[2:], user)
		}
	}
	for _, a := range attrs[2:] {
		// Kafka's clients send extensions here (tokenauth=true for a
		// delegation token, which is not served); others are ignored.
		if a.ext == "tokenauth" && strings.EqualFold(a.value, "true") {
			return nil, fmt.Errorf("%w: delegation tokens are not supported", ErrSCRAM)
		}
	}
	clientNonce := attrs[1].value
	if clientNonce == "" {
		return nil, fmt.Errorf("%w: empty client nonce", ErrSCRAM)
	}
	s.user = user
	cred, ok := s.lookup(user)
	salt, iters := cred.Salt, cred.Iterations
	s.storedKey, s.serverKey = cred.StoredKey, cred.ServerKey
	if s.mechanism == MechanismSHA512 {
		salt, iters = cred.SaltIterations512()
		s.storedKey, s.serverKey = cred.StoredKey512, cred.ServerKey512
	}
	if !ok || len(s.storedKey) != s.h().Size() || len(s.serverKey) != s.h().Size() || len(salt) == 0 {
		// An unknown user (or one with no credential for this hash) is
		// answered as a known one, with a salt that stays the same from
		// one attempt to the next, and fails at the proof: the answers
		// do not tell which users exist.
		salt, iters = fakeSalt(user), DefaultIterations
		s.storedKey, s.serverKey = nil, nil
	}
	s.clientNonce = clientNonce
	s.nonceAll = clientNonce + s.nonce()
	serverFirst := "r=" + s.nonceAll + ",s=" + base64.StdEncoding.EncodeToString(salt) + ",i=" + strconv.Itoa(iters)
	s.authMessage = bare + "," + serverFirst
	s.state = scramFinal
	return []byte(serverFirst), nil
}

// final checks client-final-message = c=CHANNEL-BINDING,r=NONCE[,ext],p=PROOF
// and answers server-final-message, v=SERVER-SIGNATURE.
func (s *ScramServer) final(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: client-final-message has no proof", ErrSCRAM)
	}
	withoutProof, proofB64 := msg[:i], msg[i+len(",p="):]
	attrs, err := scramAttrs(withoutProof)
	if err != nil {
		return nil, err
	}
	if len(attrs) < 2 || attrs[0].key != 'c' || attrs[1].key != 'r' {
		return nil, fmt.Errorf("%w: client-final-message must start c=BINDING,r=NONCE", ErrSCRAM)
	}
	if attrs[0].value != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, fmt.Errorf("%w: the channel binding does not repeat the GS2 header", ErrSCRAM)
	}
	// librdkafka (kcat, confluent-kafka) repeats its own part of the
	// nonce before the whole: Kafka's brokers accept a nonce that ends
	// with theirs, and so does this one, as long as what comes before is
	// the client's part.
	if n := attrs[1].value; n != s.nonceAll && n != s.clientNonce+s.nonceAll {
		return nil, fmt.Errorf("%w: the nonce is not the one the server sent", ErrSCRAM)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h().Size() {
		return nil, fmt.Errorf("%w: the proof is not %d bytes of base64", ErrSCRAM, s.h().Size())
	}
	s.authMessage += "," + withoutProof
	if s.storedKey == nil {
		return nil, s.invalid()
	}
	clientSignature := hmacOf(s.h, s.storedKey, []byte(s.authMessage))
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	if subtle.ConstantTimeCompare(hashOf(s.h, clientKey), s.storedKey) != 1 {
		return nil, s.invalid()
	}
	s.state = scramDone
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(s.h, s.serverKey, []byte(s.authMessage)))), nil
}

func (s *ScramServer) invalid() error {
	return fmt.Errorf("%w: invalid credentials for user %q with %s", ErrSCRAM, s.user, s.mechanism)
}

// scramAttr is one attribute of a SCRAM message: a letter and its value,
// or an extension (a longer name, as Kafka's tokenauth).
type scramAttr struct {
	key   byte
	ext   string
	value string
}

func scramAttrs(msg string) ([]scramAttr, error) {
	var out []scramAttr
	for _, part := range strings.Split(msg, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: malformed attribute %q", ErrSCRAM, truncate(part))
		}
		a := scramAttr{value: v}
		if len(k) == 1 {
			a.key = k[0]
		} else {
			a.ext = k
		}
		out = append(out, a)
	}
	return out, nil
}

// saslName decodes a SCRAM user name: "=2C" is a comma, "=3D" an equals
// sign, and no other "=" may appear.
func saslName(v string) (string, error) {
	if !strings.Contains(v, "=") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '=' {
			b.WriteByte(v[i])
			continue
		}
		switch {
		case strings.HasPrefix(v[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(v[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in user name %q", ErrSCRAM, truncate(v))
		}
		i += 2
	}
	return b.String(), nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func randomNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// fakeSaltKey makes the salts of users that do not exist: a key of this
// process, so that the same name gets the same salt on each attempt.
var fakeSaltKey = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

func fakeSalt(user string) []byte {
	return hmacOf(sha256.New, fakeSaltKey, []byte(user))[:saltBytes]
}
