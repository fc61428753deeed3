package broker

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/quirelog/quire/internal/dirlock"
)

// lockDirs takes the exclusive lock of the data directory and of the
// metadata directory (when it is another one) before anything reads them:
// a second process on the same directories fails at once, naming the pid
// of the one running, instead of recovering the running broker's logs.
func lockDirs(cfg *Config) ([]*dirlock.Lock, error) {
	dirs := []struct{ kind, dir string }{{"data", cfg.DataDir}, {"metadata", cfg.MetadataDir()}}
	var locks []*dirlock.Lock
	for _, d := range dirs {
		if len(locks) > 0 && filepath.Clean(d.dir) == filepath.Clean(dirs[0].dir) {
			continue
		}
		l, err := dirlock.Acquire(d.kind, d.dir)
		if err != nil {
			_ = releaseDirs(locks)
			return nil, fmt.Errorf("broker: %w", err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// releaseDirs gives up the directory locks, last taken first.
func releaseDirs(locks []*dirlock.Lock) error {
	var errs []error
	for i := len(locks) - 1; i >= 0; i-- {
		errs = append(errs, locks[i].Release())
	}
	return errors.Join(errs...)
}
