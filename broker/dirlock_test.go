package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/dirlock"
)

func TestBrokerDataDirLocked(t *testing.T) {
	t.Parallel()
	cfg := brokertest.Config(t)
	b := brokertest.StartConfig(t, cfg)

	second := cfg
	second.ListenAddr = "127.0.0.1:0"
	start := time.Now()
	_, err := broker.New(second)
	want := fmt.Sprintf("data directory %s is in use by another quire process (pid %d)", cfg.DataDir, os.Getpid())
	if !errors.Is(err, dirlock.ErrInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second open of the data dir: %v, want %q", err, want)
	}
	// Refused at once rather than waiting for the lock: a wait would
	// never end, so a generous deadline tells the two apart.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("second open took %v to fail: it waited for the lock", d)
	}

	// The metadata directory alone (metadata.log.dir shared by two data
	// directories) is locked too.
	other := cfg
	other.DataDir = t.TempDir()
	other.MetadataLogDir = filepath.Join(cfg.DataDir, "__quire_metadata")
	_, err = broker.New(other)
	if !errors.Is(err, dirlock.ErrInUse) || !strings.Contains(err.Error(), "metadata directory "+other.MetadataLogDir) {
		t.Fatalf("second open of the metadata dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other.DataDir, dirlock.FileName)); err != nil {
		t.Fatalf("the data dir lock of the refused open: %v", err)
	}

	// Released on shutdown: the directory opens again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := broker.New(second)
	if err != nil {
		t.Fatalf("open after shutdown: %v", err)
	}
	if err := again.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// And the data dir the refused open locked was released.
	l, err := dirlock.Acquire("data", other.DataDir)
	if err != nil {
		t.Fatalf("data dir of the refused open still locked: %v", err)
	}
	_ = l.Release()
}
