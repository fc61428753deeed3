package config_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quirelog/quire/config"
	"github.com/quirelog/quire/group"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md")

func TestBrokerConfigDefaults(t *testing.T) {
	t.Parallel()
	c := config.DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	checks := map[string]string{
		"num.partitions":                  "1",
		"default.replication.factor":      "1",
		"log.retention.hours":             "168",
		"log.segment.bytes":               "1073741824",
		"log.retention.check.interval.ms": "300000",
		"message.max.bytes":               "1048588",
		"min.insync.replicas":             "1",
		"auto.create.topics.enable":       "true",
		"process.roles":                   "broker,controller",
		"node.id":                         "1",
	}
	for k, want := range checks {
		if got, ok := c.Get(k); !ok || got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	d := config.DevConfig("/tmp/x")
	if d.ListenAddr != "127.0.0.1:9092" || !d.AutoCreateTopicsEnable || d.DataDir != "/tmp/x" || d.MetricsListen != "127.0.0.1:9404" {
		t.Fatalf("dev config: %+v", d)
	}
}

func TestBrokerConfigSources(t *testing.T) {
	t.Parallel()
	c := config.DefaultConfig()
	file := filepath.Join(t.TempDir(), "quire.yaml")
	if err := os.WriteFile(file, []byte("num.partitions: 3\nlog.dirs: /data/q\nauto.create.topics.enable: false\nlisteners: PLAINTEXT://127.0.0.1:9999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"QUIRE_NUM_PARTITIONS": "5", "QUIRE_LOG_RETENTION_HOURS": "2"}
	if err := c.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("log.retention.bytes", "1000"); err != nil {
		t.Fatal(err)
	}
	if c.NumPartitions != 5 || c.DataDir != "/data/q" || c.AutoCreateTopicsEnable || c.LogRetentionHours != 2 ||
		c.LogRetentionBytes != 1000 || c.ListenAddr != "PLAINTEXT://127.0.0.1:9999" {
		t.Fatalf("config: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := config.EnvName("log.retention.check.interval.ms"); got != "QUIRE_LOG_RETENTION_CHECK_INTERVAL_MS" {
		t.Fatalf("env name %s", got)
	}
}

func TestBrokerConfigRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, kv := range [][2]string{
		{"no.such.key", "1"},
		{"num.partitions", "many"},
		{"num.partitions", "0"},
		{"auto.create.topics.enable", "perhaps"},
		{"listeners", "nowhere"},
		{"controller.quorum.voters", "1@"},
		{"log.cleanup.policy", "shred"},
		{"default.replication.factor", "0"},
	} {
		c := config.DefaultConfig()
		err := c.Set(kv[0], kv[1])
		if !errors.Is(err, config.ErrInvalidConfig) || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	file := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(file, []byte("nope: 1\n"), 0o644)
	c := config.DefaultConfig()
	if err := c.LoadFile(file); !errors.Is(err, config.ErrInvalidConfig) {
		t.Errorf("unknown key in file: %v", err)
	}
	c = config.DefaultConfig()
	c.ProcessRoles = []string{"broker"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "controller.quorum.voters") {
		t.Errorf("broker-only without voters: %v", err)
	}
	c = config.DefaultConfig()
	c.BrokerSessionTimeoutMs = 10
	if err := c.Validate(); err == nil {
		t.Errorf("session timeout below heartbeat accepted")
	}
	c = config.DefaultConfig()
	c.GroupMinSessionTimeoutMs, c.GroupMaxSessionTimeoutMs = 60000, 30000
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "group.min.session.timeout.ms") {
		t.Errorf("group.min.session.timeout.ms above the max: %v", err)
	}
	// The classic members' bounds are the group state machine's defaults.
	gd := group.DefaultConfig()
	if d := config.DefaultConfig(); d.GroupMinSessionTimeoutMs != gd.MinSessionTimeout.Milliseconds() || d.GroupMaxSessionTimeoutMs != gd.MaxSessionTimeout.Milliseconds() {
		t.Errorf("session timeout bounds %d-%d ms, the group's defaults %v-%v", d.GroupMinSessionTimeoutMs, d.GroupMaxSessionTimeoutMs, gd.MinSessionTimeout, gd.MaxSessionTimeout)
	}
}

// TestBrokerConfigDocs keeps docs/configuration.md equal to the key table;
// `make docs` rewrites it.
func TestBrokerConfigDocs(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "docs", "configuration.md")
	want := config.ConfigMarkdown()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/configuration.md is out of date; run make docs")
	}
	help := config.ConfigHelp()
	for _, k := range []string{"num.partitions", "log.dirs", "retention.ms", "max.message.bytes"} {
		if !strings.Contains(help, k) {
			t.Errorf("help lacks %s", k)
		}
	}
}

// TestBrokerConfigSuggestsKey: an unknown key names the key it was
// probably meant to be, a typo's closest key or a topic key's broker key.
func TestBrokerConfigSuggestsKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, want string }{
		{"num.partition", `unknown key "num.partition"; did you mean num.partitions?`},
		{"retention.ms", `unknown key "retention.ms"; did you mean log.retention.ms? (retention.ms is a topic config; log.retention.ms is the server's default for it)`},
		{"max.message.bytes", "did you mean message.max.bytes?"},
		{"log.retention.hour", "did you mean log.retention.hours?"},
	} {
		c := config.DefaultConfig()
		err := c.Set(tc.key, "1")
		if !errors.Is(err, config.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want it to contain %q", tc.key, err, tc.want)
		}
	}
	c := config.DefaultConfig()
	if err := c.Set("completely.unrelated.thing", "1"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("far-off key: %v, want no suggestion", err)
	}
}
