package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/testcluster"
)

// TestCLIClusterInfoWithoutQuorum: with one of two controllers stopped the
// metadata quorum has no leader; cluster info on the survivor then shows
// no controller and every broker's FENCED as unknown (not "no"), and exits
// non-zero saying why. With the quorum whole it succeeds.
func TestCLIClusterInfoWithoutQuorum(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.WaitController(ctx)
	addr := c.Addr(1)
	out, _, err := runCLIStdin("", "--brokers", addr, "cluster", "info")
	if err != nil || strings.Contains(out, "unknown") {
		t.Fatalf("cluster info with the quorum whole: %v\n%s", err, out)
	}

	c.Stop(2)
	poll.True(t, "cluster info to see no controller", func() bool {
		out, _, err = runCLIStdin("", "--brokers", addr, "cluster", "info")
		return err != nil
	})
	if !errors.Is(err, errNoController) || exitCode(err) == 0 {
		t.Fatalf("cluster info without a quorum: %v\n%s", err, out)
	}
	if !strings.Contains(out, "CONTROLLER  none (no quorum)") {
		t.Errorf("cluster info without a quorum names a controller:\n%s", out)
	}
	var rows int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || (f[0] != "1" && f[0] != "2" && f[0] != "1*" && f[0] != "2*") {
			continue
		}
		rows++
		if f[3] != "unknown" { // ID ADDRESS VOTER FENCED (no rack)
			t.Errorf("broker row %q: FENCED is %q, want unknown", line, f[3])
		}
	}
	if rows != 2 {
		t.Errorf("want 2 broker rows:\n%s", out)
	}

	out, _, err = runCLIStdin("", "--brokers", addr, "--format", "json", "cluster", "info")
	if !errors.Is(err, errNoController) {
		t.Fatalf("cluster info --format json without a quorum: %v", err)
	}
	var d struct {
		ControllerID int32 `json:"controller_id"`
		Brokers      []struct {
			Fenced *bool `json:"fenced"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.ControllerID >= 0 || len(d.Brokers) != 2 {
		t.Fatalf("json: %v %+v\n%s", err, d, out)
	}
	for _, b := range d.Brokers {
		if b.Fenced != nil {
			t.Errorf("json: fenced %v, want null (unknown):\n%s", *b.Fenced, out)
		}
	}
}
