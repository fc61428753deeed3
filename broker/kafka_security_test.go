package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/tlsconf"
)

// secureKafka is a node with TLS, the authorizer on, and three Kafka
// listeners: SSL, SASL_SSL and SASL_PLAINTEXT.
type secureKafka struct {
	b     *broker.Broker
	addrs map[string]string
	dir   string
	pool  *x509.CertPool
}

func startSecureKafka(t *testing.T) *secureKafka {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsconf.NewCA("kafka-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	node, err := ca.WriteFiles(dir, "node", "node-1", []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"admin", "reader"} {
		if _, err := ca.WriteFiles(dir, c, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
		c.KafkaListenerNames = "SSL,SASL_SSL,SASL_PLAINTEXT"
		c.Security.TLSCertFile, c.Security.TLSKeyFile, c.Security.TLSClientCAFile = node.Cert, node.Key, node.CA
		c.Security.TLSClientAuth = string(tlsconf.RequestClientCert)
		c.Security.SuperUsers = "User:CN=node-1,O=quire;User:CN=admin,O=quire"
		c.Security.AuthorizerEnable = true
		c.Security.SASLEnabledMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
		c.AutoCreateTopicsEnable = false
	})
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionSecurity)
	s := &secureKafka{b: b, addrs: map[string]string{}, dir: dir, pool: x509.NewCertPool()}
	for _, l := range []string{"SSL", "SASL_SSL", "SASL_PLAINTEXT"} {
		a, ok := b.ListenerAddr(l)
		if !ok {
			t.Fatalf("no %s listener", l)
		}
		s.addrs[l] = a
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	s.pool.AppendCertsFromPEM(caPEM)

	// Admin, by certificate over gRPC: a topic, users and ACLs.
	r, err := tlsconf.NewReloader(tlsconf.Files{Cert: filepath.Join(dir, "admin.pem"), Key: filepath.Join(dir, "admin-key.pem"), CA: node.CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(r.ClientCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx := ctxT(t)
	admin, sec := quirev1.NewAdminClient(cc), quirev1.NewSecurityClient(cc)
	for _, topic := range []string{"orders", "secret"} {
		if _, err := admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: topic, OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 1}}); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	if _, err := sec.UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: "alice", Password: "alice-pw"}); err != nil {
		t.Fatal(err)
	}
	acls := []*quirev1.Acl{
		{Principal: "User:alice", Permission: "Allow", Operation: "Write", ResourceType: "Topic", ResourceName: "orders", PatternType: "Literal"},
		{Principal: "User:CN=reader,O=quire", Permission: "Allow", Operation: "Read", ResourceType: "Topic", ResourceName: "orders", PatternType: "Literal"},
	}
	if _, err := sec.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: acls}); err != nil {
		t.Fatal(err)
	}
	return s
}

// client is a franz-go client of listener, with TLS trusting the CA when
// tlsOn, presenting cert ("" for none), authenticating with mech (nil for
// none).
func (s *secureKafka) client(t *testing.T, listener string, tlsOn bool, cert string, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	o := []kgo.Opt{kgo.SeedBrokers(s.addrs[listener]), kgo.RequestRetries(2), kgo.RetryTimeout(10 * time.Second)}
	if tlsOn {
		cfg := &tls.Config{RootCAs: s.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		if cert != "" {
			kp, err := tls.LoadX509KeyPair(filepath.Join(s.dir, cert+".pem"), filepath.Join(s.dir, cert+"-key.pem"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		o = append(o, kgo.DialTLSConfig(cfg))
	}
	if mech != nil {
		o = append(o, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(append(o, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceOne(ctx context.Context, cl *kgo.Client, topic, value string) error {
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr()
}

// metadataTopics lists the topics a Metadata request for all topics
// answers the client.
func metadataTopics(ctx context.Context, t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	var out []string
	for _, tp := range resp.Topics {
		out = append(out, *tp.Topic)
	}
	slices.Sort(out)
	return out
}

func TestBrokerKafkaSecurity(t *testing.T) {
	t.Parallel()
	s := startSecureKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alice256 := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()
	alice512 := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()

	t.Run("TLS without a client certificate is User:ANONYMOUS", func(t *testing.T) {
		cl := s.client(t, "SSL", true, "", nil)
		if got := metadataTopics(ctx, t, cl); len(got) != 0 {
			t.Fatalf("an anonymous client sees topics %v", got)
		}
		if err := produceOne(ctx, cl, "orders", "x"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("anonymous produce: %v, want an authorization failure", err)
		}
	})
	t.Run("plaintext on the SSL listener is refused", func(t *testing.T) {
		cl := s.client(t, "SSL", false, "", nil)
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("a plaintext client was answered on the SSL listener")
		}
	})
	t.Run("mutual TLS: the certificate's principal", func(t *testing.T) {
		admin := s.client(t, "SSL", true, "admin", nil)
		if err := produceOne(ctx, admin, "orders", "from-admin"); err != nil {
			t.Fatalf("admin (a super user by certificate) produce: %v", err)
		}
		reader := s.client(t, "SSL", true, "reader", nil, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
		if got := metadataTopics(ctx, t, reader); !slices.Equal(got, []string{"orders"}) {
			t.Fatalf("the reader sees topics %v, want [orders] (Read implies Describe; not secret)", got)
		}
		fs := reader.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("reader fetch: %v", err)
		}
		if recs := fs.Records(); len(recs) == 0 || string(recs[0].Value) != "from-admin" {
			t.Fatalf("reader read %v", recs)
		}
		if err := produceOne(ctx, s.client(t, "SSL", true, "reader", nil, kgo.DisableIdempotentWrite()), "orders", "x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("reader produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("SCRAM-SHA-256 over TLS and SCRAM-SHA-512 without", func(t *testing.T) {
		for _, tc := range []struct {
			listener string
			tls      bool
			mech     sasl.Mechanism
		}{{"SASL_SSL", true, alice256}, {"SASL_SSL", true, alice512}, {"SASL_PLAINTEXT", false, alice512}, {"SASL_PLAINTEXT", false, alice256}} {
			cl := s.client(t, tc.listener, tc.tls, "", tc.mech)
			if err := produceOne(ctx, cl, "orders", tc.mech.Name()); err != nil {
				t.Fatalf("%s %s: alice's produce: %v", tc.listener, tc.mech.Name(), err)
			}
			if got := metadataTopics(ctx, t, cl); !slices.Equal(got, []string{"orders"}) {
				t.Fatalf("%s %s: alice sees topics %v, want [orders]", tc.listener, tc.mech.Name(), got)
			}
		}
	})
	t.Run("a wrong password is SASL_AUTHENTICATION_FAILED", func(t *testing.T) {
		for _, mech := range []sasl.Mechanism{
			scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
			scram.Auth{User: "nobody", Pass: "alice-pw"}.AsSha512Mechanism(),
		} {
			cl := s.client(t, "SASL_SSL", true, "", mech)
			err := cl.Ping(ctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid credentials") {
				t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED saying invalid credentials", mech.Name(), err)
			}
		}
	})
	t.Run("PLAIN only over TLS", func(t *testing.T) {
		mech := plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()
		if err := produceOne(ctx, s.client(t, "SASL_SSL", true, "", mech), "orders", "plain"); err != nil {
			t.Fatalf("PLAIN over TLS: %v", err)
		}
		err := s.client(t, "SASL_PLAINTEXT", false, "", mech).Ping(ctx)
		if !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("PLAIN without TLS: %v, want UNSUPPORTED_SASL_MECHANISM", err)
		}
		if err := s.client(t, "SASL_SSL", true, "", plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("PLAIN with a wrong password: %v", err)
		}
	})
	t.Run("AlterUserScramCredentials sets each mechanism on its own", func(t *testing.T) {
		brokertest.WaitMetadataVersion(t, s.b, metadata.MetadataVersionIncarnations)
		adm := kadm.NewClient(s.client(t, "SSL", true, "admin", nil))
		// described is kate's credentials as DescribeUserScramCredentials
		// answers them: mechanism:iterations.
		described := func() string {
			t.Helper()
			us, err := adm.DescribeUserSCRAMs(ctx, "kate")
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(us["kate"].Err, kerr.ResourceNotFound) {
				return "none"
			}
			if us["kate"].Err != nil {
				t.Fatalf("describe kate: %v", us["kate"].Err)
			}
			var out []string
			for _, ci := range us["kate"].CredInfos {
				out = append(out, ci.Mechanism.String()+":"+strconv.Itoa(int(ci.Iterations)))
			}
			return strings.Join(out, " ")
		}
		alter := func(del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM) {
			t.Helper()
			rs, err := adm.AlterUserSCRAMs(ctx, del, up)
			if err != nil || rs["kate"].Err != nil {
				t.Fatalf("alter kate (delete %+v, upsert %+v): %v %v (%s)", del, up, err, rs["kate"].Err, rs["kate"].ErrMessage)
			}
		}
		// login says whether kate gets in with mech and password.
		login := func(mech string, pw string) error {
			m := scram.Auth{User: "kate", Pass: pw}.AsSha256Mechanism()
			if mech == "512" {
				m = scram.Auth{User: "kate", Pass: pw}.AsSha512Mechanism()
			}
			return s.client(t, "SASL_SSL", true, "", m).Ping(ctx)
		}
		// SCRAM-SHA-512 only, with kadm salting the password itself.
		alter(nil, []kadm.UpsertSCRAM{{User: "kate", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "kate-512"}})
		if got := described(); got != "SCRAM-SHA-512:4096" {
			t.Fatalf("kate after a SCRAM-SHA-512 upsert: %s", got)
		}
		if err := login("512", "kate-512"); err != nil {
			t.Fatalf("SCRAM-SHA-512 login with the credential set through Kafka's API: %v", err)
		}
		if err := login("256", "kate-512"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("SCRAM-SHA-256 login of a user with SCRAM-SHA-512 only: %v", err)
		}
		// SCRAM-SHA-256 added with another password and iterations: the
		// SCRAM-SHA-512 credential stays as it was.
		alter(nil, []kadm.UpsertSCRAM{{User: "kate", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "kate-256"}})
		if got := described(); got != "SCRAM-SHA-256:8192 SCRAM-SHA-512:4096" {
			t.Fatalf("kate after a SCRAM-SHA-256 upsert: %s", got)
		}
		for _, c := range []struct{ mech, pw string }{{"256", "kate-256"}, {"512", "kate-512"}} {
			if err := login(c.mech, c.pw); err != nil {
				t.Fatalf("SCRAM-SHA-%s login with %s: %v", c.mech, c.pw, err)
			}
		}
		if err := login("512", "kate-256"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("SCRAM-SHA-512 login with the SCRAM-SHA-256 password: %v", err)
		}
		// Both in one request, then one deleted: the other stays.
		alter(nil, []kadm.UpsertSCRAM{{User: "kate", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "new-256"},
			{User: "kate", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "new-512"}})
		if got := described(); got != "SCRAM-SHA-256:4096 SCRAM-SHA-512:8192" {
			t.Fatalf("kate after upserting both: %s", got)
		}
		alter([]kadm.DeleteSCRAM{{User: "kate", Mechanism: kadm.ScramSha256}}, nil)
		if got := described(); got != "SCRAM-SHA-512:8192" {
			t.Fatalf("kate after deleting SCRAM-SHA-256: %s", got)
		}
		if err := login("512", "new-512"); err != nil {
			t.Fatalf("SCRAM-SHA-512 login after SCRAM-SHA-256 was deleted: %v", err)
		}
		rs, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "kate", Mechanism: kadm.ScramSha256}}, nil)
		if err != nil || !errors.Is(rs["kate"].Err, kerr.ResourceNotFound) {
			t.Fatalf("deleting a mechanism kate no longer has: %v %+v, want RESOURCE_NOT_FOUND", err, rs["kate"])
		}
		alter([]kadm.DeleteSCRAM{{User: "kate", Mechanism: kadm.ScramSha512}}, nil)
		if got := described(); got != "none" {
			t.Fatalf("kate after deleting her last mechanism: %s", got)
		}
	})
	t.Run("the ACLs of the gRPC door", func(t *testing.T) {
		cl := s.client(t, "SASL_SSL", true, "", alice256, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
		// Write but not Read on orders.
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice's fetch: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// Nothing on secret: asked by name it is refused, not hidden.
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range []string{"secret", "orders"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, tp := range resp.Topics {
			codes[*tp.Topic] = tp.ErrorCode
		}
		if len(resp.Brokers) != 1 || codes["secret"] != kerr.TopicAuthorizationFailed.Code || codes["orders"] != 0 || len(codes) != 2 {
			t.Fatalf("metadata for secret and orders: brokers %d, codes %v", len(resp.Brokers), codes)
		}
		if err := produceOne(ctx, cl, "secret", "x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice's produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		// One request naming both: the refused topic is answered on its
		// own, the other served (Write implies Describe, as in Kafka).
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Version = 1
		for _, name := range []string{"secret", "orders"} {
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = name
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
		}
		// Straight to the node: the client's own sharding would look the
		// topics up first and stop at the refused one.
		raw, err := cl.SeedBrokers()[0].Request(ctx, lo)
		if err != nil {
			t.Fatal(err)
		}
		lor := raw.(*kmsg.ListOffsetsResponse)
		loCodes := map[string]int16{}
		for _, tp := range lor.Topics {
			for _, p := range tp.Partitions {
				loCodes[tp.Topic] = p.ErrorCode
			}
		}
		if loCodes["secret"] != kerr.TopicAuthorizationFailed.Code || loCodes["orders"] != 0 || len(loCodes) != 2 {
			t.Fatalf("ListOffsets of secret and orders: codes %v, want secret refused and orders served", loCodes)
		}
		// No ACL on any group: the client's FindCoordinator is refused
		// (Describe on the group, as Kafka's), and so is the OffsetFetch
		// sent to the broker all the same.
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = "alice-group"
		if _, err := of.RequestWith(ctx, cl); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("alice's OffsetFetch through the coordinator: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
		og := kmsg.NewOffsetFetchRequestGroup()
		og.Group = of.Group
		of.Groups = append(of.Groups, og) // the form of v8 and later
		r, err := cl.SeedBrokers()[0].Request(ctx, of)
		if err != nil {
			t.Fatal(err)
		}
		ofr := r.(*kmsg.OffsetFetchResponse)
		if len(ofr.Groups) != 1 || ofr.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("alice's OffsetFetch: %+v, want GROUP_AUTHORIZATION_FAILED", ofr)
		}
	})
}

// The Kafka listeners' security settings are checked with the rest.
func TestBrokerConfigKafkaSecurity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protocols, mechs string
		tls, authz       bool
		wantErr          string // "" = valid
	}{
		{"", "", false, false, ""},
		{"KAFKA:SASL_PLAINTEXT", "SCRAM-SHA-512", false, false, ""},
		{"KAFKA:SASL_SSL", "SCRAM-SHA-256,PLAIN", true, false, ""},
		{"KAFKA:SSL", "", true, false, ""},
		{"kafka:ssl", "", false, false, "Kafka listener KAFKA is SSL, which needs TLS"},
		{"KAFKA:SASL_SSL", "", false, false, "which needs TLS"},
		{"KAFKA:TLS", "", false, false, `protocol "TLS": want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`},
		{"KAFKA", "", false, false, "want NAME:PROTOCOL"},
		{"PLAINTEXT:SSL", "", true, false, "PLAINTEXT is not a Kafka listener"},
		{"KAFKA:SASL_PLAINTEXT", "GSSAPI", false, false, `mechanism "GSSAPI" is not served`},
		{"KAFKA:SASL_PLAINTEXT", "", false, false, "no mechanism is enabled"},
		{"KAFKA:SASL_PLAINTEXT", "PLAIN", false, false, "PLAIN is the only mechanism enabled"},
		{"KAFKA:PLAINTEXT", "", true, false, "Kafka listener KAFKA is PLAINTEXT beside TLS listeners with authorizer.enable off"},
	} {
		c := broker.DefaultConfig()
		c.ListenAddr, c.KafkaListenerNames = "PLAINTEXT://:9092,KAFKA://:9093", "KAFKA"
		c.Security.KafkaSecurityProtocolMap = tc.protocols
		if tc.mechs != "" || tc.wantErr == "no mechanism is enabled" {
			c.Security.SASLEnabledMechanisms = tc.mechs
		}
		c.Security.AuthorizerEnable = tc.authz
		if tc.tls {
			c.Security.TLSCertFile, c.Security.TLSKeyFile = "cert.pem", "key.pem"
		}
		err := c.Validate()
		if err != nil && !strings.Contains(err.Error(), "kafka") && !strings.Contains(err.Error(), "sasl") {
			err = nil // the files do not exist: only the Kafka listeners' errors matter here
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q / %q: %v", tc.protocols, tc.mechs, err)
		case tc.wantErr != "" && (!errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q / %q: got %v, want an invalid config error with %q", tc.protocols, tc.mechs, err, tc.wantErr)
		}
	}
}
