//go:build linux

package broker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// raiseOpenFileLimit raises the soft open-file limit (RLIMIT_NOFILE) to
// the hard one and returns both as they then are.
func raiseOpenFileLimit() (capacity, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return capacity{}, fmt.Errorf("broker: read RLIMIT_NOFILE: %w", err)
	}
	c := capacity{OpenFiles: lim.Cur, OpenFilesHard: lim.Max}
	if lim.Cur >= lim.Max {
		return c, nil
	}
	raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return c, fmt.Errorf("broker: raise RLIMIT_NOFILE from %d to %d: %w", lim.Cur, lim.Max, err)
	}
	c.OpenFiles = lim.Max
	return c, nil
}

// memoryLimit is the machine's memory (MemTotal), or the cgroup's limit
// when lower; 0 when neither can be read.
func memoryLimit() uint64 {
	total := memTotal()
	if cg := cgroupMemoryMax(); cg > 0 && (total == 0 || cg < total) {
		return cg
	}
	return total
}

func memTotal() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// cgroupMemoryMax is cgroup v2's memory.max of this process's cgroup (as
// seen at the usual mount), 0 for "max" or none.
func cgroupMemoryMax() uint64 {
	data, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
