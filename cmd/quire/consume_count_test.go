package main

import (
	"strings"
	"testing"
)

// TestCLIConsumeCountMustBePositive: -n 0 and -n -1 are refused before
// dialling, saying that leaving -n out follows; they no longer mean
// "follow forever" in silence.
func TestCLIConsumeCountMustBePositive(t *testing.T) {
	for _, n := range []string{"0", "-1"} {
		// No broker listens on port 1: the flag must fail first.
		out, _, err := runCLIStdin("", "--brokers", "127.0.0.1:1", "consume", "t", "-n", n)
		if err == nil || !strings.Contains(err.Error(), "bad -n "+n+": the number of records to print must be positive") ||
			!strings.Contains(err.Error(), "leave -n out to follow") {
			t.Errorf("-n %s: printed %q, error %v", n, out, err)
		}
	}
}
