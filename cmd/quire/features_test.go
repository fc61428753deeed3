package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
)

// TestClusterFeaturesCommand runs `quire cluster features` against a node
// of an older release (level 1 only): it shows level 1 and the node's
// range, and --upgrade 2 fails naming the range; then against a current
// node, which raises the level by itself.
func TestClusterFeaturesCommand(t *testing.T) {
	t.Parallel()
	old := brokertest.Start(t, func(c *broker.Config) { c.MetadataVersions = metadata.VersionRange{Min: 1, Max: 1} })
	var out bytes.Buffer
	if err := runCLI(&out, "--brokers", old.Addr(), "cluster", "features"); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "METADATA.VERSION  1\n") || !strings.Contains(s, "\n1       1    1    no") {
		t.Fatalf("features of an old node:\n%s", s)
	}
	err := runCLI(&out, "--brokers", old.Addr(), "cluster", "features", "--upgrade", "2")
	if err == nil || !strings.Contains(err.Error(), "FEATURE_UPDATE_FAILED") || !strings.Contains(err.Error(), "supports 1-1") {
		t.Fatalf("upgrade past the node's range: %v", err)
	}

	cur := brokertest.Start(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out.Reset()
		if err := runCLI(&out, "--brokers", cur.Addr(), "--format", "json", "cluster", "features"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), fmt.Sprintf(`"metadata_version": %d`, metadata.LatestMetadataVersion)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("level not raised:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond) // polling the level
	}
	out.Reset()
	latest := fmt.Sprint(metadata.LatestMetadataVersion)
	if err := runCLI(&out, "--brokers", cur.Addr(), "cluster", "features", "--upgrade", latest); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "metadata.version finalized at "+latest) {
		t.Fatalf("upgrade output:\n%s", out.String())
	}
}
