package testcluster_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterMetadataVersionRollingUpgrade: with one node still on an
// older release (it supports metadata.version 1 only), the cluster stays
// at level 1, refuses a level-2 command and a raise to 2, both naming that
// node; once it is restarted with the full range, the controller raises
// the level by itself and the command is accepted.
// namesOldNode reports whether a refusal names node 3 and its range: as a
// broker ("3 (supports 1-1)") or, when it is the controller, as that
// ("the controller (node 3) supports 1-1").
func namesOldNode(msg string) bool {
	return strings.Contains(msg, "3 (supports 1-1)") || strings.Contains(msg, "(node 3) supports 1-1")
}

func TestClusterMetadataVersionRollingUpgrade(t *testing.T) {
	t.Parallel()
	const old = int32(3)
	c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) {
		if id == old {
			cfg.MetadataVersions = metadata.VersionRange{Min: 1, Max: 1}
		}
	}))
	ctx := testCtx(t)

	f, err := admin(c, 1).DescribeFeatures(ctx, &quirev1.DescribeFeaturesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if f.MetadataVersion != 1 || len(f.Brokers) != 3 {
		t.Fatalf("features %v", f)
	}
	for _, b := range f.Brokers {
		want := metadata.LatestMetadataVersion
		if b.BrokerId == old {
			want = 1
		}
		if b.MinMetadataVersion != 1 || b.MaxMetadataVersion != want {
			t.Fatalf("broker %d supports %d-%d", b.BrokerId, b.MinMetadataVersion, b.MaxMetadataVersion)
		}
	}

	_, err = admin(c, 2).UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: 2})
	if e := errorDetail(err); status.Code(err) != codes.FailedPrecondition || e.GetCode() != quirev1.ErrorCode_FEATURE_UPDATE_FAILED ||
		e.GetRetriable() || !namesOldNode(e.GetMessage()) {
		t.Fatalf("raise to 2 with node 3 at 1-1: %v (%v)", err, e)
	}

	allocate := func() (metadata.ProducerIDBlock, error) {
		ctl := c.WaitController(ctx)
		b, _ := c.Image(ctl).Broker(ctl)
		return c.Node(ctl).Metadata().Ctl().AllocateProducerIDs(ctx, ctl, b.Epoch)
	}
	_, err = allocate()
	if !errors.Is(err, metadata.ErrUnsupportedVersion) || !namesOldNode(err.Error()) {
		t.Fatalf("level-2 command at level 1: %v", err)
	}
	for _, id := range c.IDs() {
		if v := c.Image(id).MetadataVersion(); v != 1 {
			t.Fatalf("node %d is at level %d", id, v)
		}
	}

	// The node is upgraded: restarted with everything this build knows.
	c.Stop(old)
	if err := c.TryRestart(old, func(cfg *broker.Config) { cfg.MetadataVersions = metadata.VersionRange{} }); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(old).WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() == metadata.LatestMetadataVersion })
	block, err := allocate()
	if err != nil {
		t.Fatalf("level-2 command at level %d: %v", metadata.LatestMetadataVersion, err)
	}
	if block.Size != metadata.ProducerIDBlockSize {
		t.Fatalf("block %+v", block)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.NextProducerID() == block.First+block.Size })

	// Raising to the finalized level again is a no-op; lower is refused.
	latest := metadata.LatestMetadataVersion
	if r, err := admin(c, old).UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: latest}); err != nil || r.MetadataVersion != latest {
		t.Fatalf("raise to the finalized level: %v %v", r, err)
	}
	if _, err := admin(c, 1).UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: 1}); errorDetail(err).GetCode() != quirev1.ErrorCode_FEATURE_UPDATE_FAILED {
		t.Fatalf("lower the level: %v", err)
	}
}
