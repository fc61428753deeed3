package main

import (
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
)

// TestCLIProduceTooLargeNotEchoed: a record the topic refuses as too
// large is named on standard error by a cut of its value and its size,
// not echoed whole, with -v and without; the reason follows.
func TestCLIProduceTooLargeNotEchoed(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("", append(brokers, "topic", "create", "small", "-p", "1", "-c", "max.message.bytes=1048576")...); err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 5<<20) + "\n"
	for _, v := range [][]string{nil, {"-v"}} {
		args := append(append(append([]string{}, brokers...), "produce", "small"), v...)
		_, errOut, err := runCLIStdin(line, args...)
		if err == nil {
			t.Fatalf("%v: a 5 MiB record to a topic of max.message.bytes 1 MiB succeeded", v)
		}
		all := errOut + err.Error()
		if len(all) > 4096 {
			t.Fatalf("%v: %d bytes of errors for one record (the value echoed?): %.300s", v, len(all), all)
		}
		if !strings.Contains(all, "max.message.bytes") && !strings.Contains(all, "too large") && !strings.Contains(all, "BatchMaxBytes") {
			t.Fatalf("%v: no reason given: %s", v, all)
		}
		if len(v) > 0 && !strings.Contains(errOut, "(5242880 bytes)") {
			t.Fatalf("-v: the record is not named by its size: %s", errOut)
		}
	}
}
