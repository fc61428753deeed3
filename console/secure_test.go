package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/console"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
	"github.com/quirelog/quire/tlsconf"
)

// TestConsoleSecured: on a cluster with mutual TLS and ACLs, a console
// with a super user's certificate shows the users and ACLs and browses a
// topic; one that authenticates as a SCRAM user with only Describe and
// Read on the topic browses it too, and gets the broker's refusal, in its
// words, for what its ACLs do not allow.
func TestConsoleSecured(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.New(t, 1, testcluster.TLS(sec), testcluster.Authorizer())
	ctx := testCtx(t)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionSecurity)
	creds := func(name string) *tlsconf.Reloader {
		r, err := tlsconf.NewReloader(sec.Files(name, false), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rootOpt, err := client.TLSFiles(sec.Files(testcluster.NodeName(1), false).CA, sec.Files(testcluster.NodeName(1), false).Cert, sec.Files(testcluster.NodeName(1), false).Key)
	if err != nil {
		t.Fatal(err)
	}
	root, err := client.New(ctx, client.SeedBrokers(c.Addr(1)), rootOpt, client.Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Close)
	if _, err := root.CreateTopic(ctx, client.TopicSpec{Name: "secret", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.WaitLeader(ctx, "secret", 0)
	if err := root.UpsertUser(ctx, "viewer", "viewer-pw", 0); err != nil {
		t.Fatal(err)
	}
	if err := root.CreateACLs(ctx,
		client.ACL{Principal: "User:viewer", Permission: "Allow", Operation: "Describe", ResourceType: "Topic", ResourceName: "secret", PatternType: "Literal"},
		client.ACL{Principal: "User:viewer", Permission: "Allow", Operation: "Read", ResourceType: "Topic", ResourceName: "secret", PatternType: "Literal"},
	); err != nil {
		t.Fatal(err)
	}
	if err := root.ProduceSync(ctx, &client.Record{Topic: "secret", Key: []byte("who"), Value: []byte("classified")}); err != nil {
		t.Fatal(err)
	}

	start := func(cfg console.Config) string {
		cfg.Brokers, cfg.RequestTimeout, cfg.SampleInterval = []string{c.Addr(1)}, 5*time.Second, -1
		con, err := console.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(con.Handler())
		t.Cleanup(func() { con.Close(); srv.Close() })
		return srv.URL
	}
	admin := start(console.Config{Transport: creds(testcluster.NodeName(1)).ClientCredentials()})
	code, page := get(t, admin+"/security")
	if code != http.StatusOK {
		t.Fatalf("security page: %d\n%s", code, page)
	}
	mustContain(t, page, "security page as a super user", `id="principal">`+testcluster.NodePrincipal(1)+`<`, `data-user="viewer"`,
		"<td>User:viewer</td><td>Allow</td><td>Read</td><td>Topic</td><td>secret</td><td>Literal</td>")
	_, page = get(t, admin+"/topics/secret/messages?key=who")
	mustContain(t, page, "messages as a super user", `data-record="0/0"`, `class="value value-cell">classified<`)

	// The super user adds an ACL for the viewer, then deletes it.
	group := client.ACL{Principal: "User:viewer", Permission: "Allow", Operation: "Describe", ResourceType: "Group", ResourceName: "viewers", PatternType: "Literal"}
	aclForm := url.Values{"principal": {group.Principal}, "permission": {group.Permission}, "operation": {group.Operation},
		"resource_type": {group.ResourceType}, "resource_name": {group.ResourceName}, "pattern": {group.PatternType}}
	resp := post(t, admin+"/actions/create-acl", aclForm)
	if page := body(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(page, "Add the ACL: Allow User:viewer Describe on Group &#34;viewers&#34; (Literal).") {
		t.Fatalf("unconfirmed ACL: %d\n%s", resp.StatusCode, page)
	}
	aclForm.Set("confirm", "yes")
	if resp := post(t, admin+"/actions/create-acl", aclForm); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed ACL: %d\n%s", resp.StatusCode, body(t, resp))
	}
	if got, err := root.ListACLs(ctx, client.ACL{ResourceType: "Group"}); err != nil || len(got) != 1 || got[0] != group {
		t.Fatalf("ACLs on groups after the form: %+v, %v", got, err)
	}
	_, page = get(t, admin+"/security")
	mustContain(t, page, "security page with the new ACL", "<td>User:viewer</td><td>Allow</td><td>Describe</td><td>Group</td><td>viewers</td>", `action="/actions/delete-acl"`)
	if resp := post(t, admin+"/actions/delete-acl", aclForm); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ACL delete: %d\n%s", resp.StatusCode, body(t, resp))
	}
	if got, err := root.ListACLs(ctx, client.ACL{ResourceType: "Group"}); err != nil || len(got) != 0 {
		t.Fatalf("ACLs on groups after the delete: %+v, %v", got, err)
	}
	bad := url.Values{"principal": {"viewer"}, "permission": {"Allow"}, "operation": {"Read"}, "resource_type": {"Topic"}, "resource_name": {"x"}, "pattern": {"Literal"}, "confirm": {"yes"}}
	if resp := post(t, admin+"/actions/create-acl", bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body(t, resp), "principal &#34;viewer&#34;: write User:NAME") {
		t.Fatalf("an ACL without User: accepted: %d", resp.StatusCode)
	}

	viewer := start(console.Config{Transport: creds("console-host").ClientCredentials(), Auth: client.SCRAMCredentials("viewer", "viewer-pw")})
	_, page = get(t, viewer+"/security")
	mustContain(t, page, "security page as viewer", `id="principal">User:viewer<`, `id="users-error"`, `id="acls-error"`, "AUTHORIZATION_FAILED")
	_, page = get(t, viewer+"/topics/secret/messages")
	mustContain(t, page, "messages as viewer", `data-record="0/0"`)
	resp = post(t, viewer+"/actions/alter-configs", url.Values{"name": {"secret"}, "key": {"retention.ms"}, "value": {"1000"}})
	if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "AUTHORIZATION_FAILED") {
		t.Fatalf("config edit without the right: %d\n%s", resp.StatusCode, page)
	}
	aclForm.Set("confirm", "yes")
	resp = post(t, viewer+"/actions/create-acl", aclForm)
	if page := body(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("an ACL added by the viewer: %d\n%s", resp.StatusCode, page)
	}

	if _, err := console.New(console.Config{Brokers: []string{c.Addr(1)}, Auth: client.SCRAMCredentials("viewer", "pw")}); err == nil ||
		!strings.Contains(err.Error(), "sent only over TLS") {
		t.Fatalf("a user without TLS: %v", err)
	}
}
