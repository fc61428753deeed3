package config

import (
	"testing"

	"github.com/quirelog/quire/storage"
)

func TestBrokerConfigRetentionPrecedence(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if got := c.retentionMs(); got != 168*3600*1000 {
		t.Fatalf("hours: %d", got)
	}
	_ = c.Set("log.retention.minutes", "5")
	if got := c.retentionMs(); got != 5*60*1000 {
		t.Fatalf("minutes: %d", got)
	}
	_ = c.Set("log.retention.ms", "-1")
	if got := c.retentionMs(); got != -1 {
		t.Fatalf("ms: %d", got)
	}
	tc, err := c.TopicDefaults().Resolve(map[string]string{"retention.bytes": "100"})
	if err != nil || tc.RetentionMs != -1 || tc.RetentionBytes != 100 || tc.MaxMessageBytes != 1048588 {
		t.Fatalf("resolved %+v %v", tc, err)
	}
	if lc := tc.LogConfig(storage.DefaultLogConfig()); !lc.Preallocate {
		t.Fatal("preallocate is on by default")
	}
	_ = c.Set("log.preallocate", "false")
	tc, _ = c.TopicDefaults().Resolve(nil)
	if tc.LogConfig(storage.DefaultLogConfig()).Preallocate {
		t.Fatal("log.preallocate=false is not the topics' default")
	}
	tc, _ = c.TopicDefaults().Resolve(map[string]string{"preallocate": "true"})
	if !tc.LogConfig(storage.DefaultLogConfig()).Preallocate {
		t.Fatal("preallocate=true on the topic does not win over the broker's default")
	}
	if _, err := c.TopicDefaults().Resolve(map[string]string{"preallocate": "yes"}); err == nil {
		t.Fatal("preallocate=yes accepted")
	}
}
