//go:build chaosfs

package main

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/storage"
)

// A test build of the server (go build -tags chaosfs), for the fault
// suite: its partition logs go through storage.ErrorFS, and while the
// file named by QUIRE_CHAOS_DISK_FAULT exists every write and fsync
// fails with EIO, as a failing disk would. The suite creates the file,
// then heals the node as an operator replaces a disk: kill, remove the
// file, restart.

// diskFaultEnv names the file whose existence fails the disk.
const diskFaultEnv = "QUIRE_CHAOS_DISK_FAULT"

func init() { serverHooks = append(serverHooks, injectDiskFaults) }

func injectDiskFaults(cfg *broker.Config) {
	path := os.Getenv(diskFaultEnv)
	if path == "" {
		return
	}
	inner := cfg.FS
	if inner == nil {
		inner = storage.OSFS{}
	}
	efs := storage.NewErrorFS(inner)
	var failing atomic.Bool
	efs.SetInjector(func(op storage.Op, _ string) error {
		if (op == storage.OpWrite || op == storage.OpSync) && failing.Load() {
			return syscall.EIO
		}
		return nil
	})
	cfg.FS = efs
	check := func() {
		_, err := os.Stat(path)
		if on := err == nil; on != failing.Load() {
			failing.Store(on)
			cfg.Logger.Warn("chaos: disk fault", "failing", on, "file", path)
		}
	}
	check()
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			check()
		}
	}()
	cfg.Logger.Info("chaos: disk faults armed", "file", path)
}
