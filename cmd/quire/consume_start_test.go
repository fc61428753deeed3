package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
)

// TestCLIConsumeSaysWhereItStarts: consume -o end, -o @TIMESTAMP past the
// last record and an offset out of range with --reset latest all wait for
// new records; each says first, on standard error, at which offset of
// each partition it starts, and then prints the record produced there.
func TestCLIConsumeSaysWhereItStarts(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("", append(brokers, "topic", "create", "st", "-p", "2")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLIStdin("a\nb\n", append(brokers, "produce", "st", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLIStdin("c\n", append(brokers, "produce", "st", "-p", "1")...); err != nil {
		t.Fatal(err)
	}
	future := fmt.Sprint(time.Now().Add(24 * time.Hour).UnixMilli())
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "end"}, "starting st at 0:2, 1:1 (partition:offset; -o end: the end, waiting for new records)"},
		{[]string{"-o", "@" + future}, "starting st at 0:3, 1:1 (partition:offset; -o @" + future + ": no record at or after the time, so the end"},
		{[]string{"-p", "0", "-o", "100", "--reset", "latest"}, "partition 0 of st: offset 100 is out of range (valid offsets are 0 to 3, log end 4); starting at 4 (--reset latest)"},
	} {
		var out, errOut syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- runCLIWith(strings.NewReader(""), &out, &errOut, append(append(brokers, "consume", "st", "-n", "1"), tc.args...)...)
		}()
		poll.True(t, fmt.Sprintf("%v to say where it starts", tc.args), func() bool {
			return strings.Contains(errOut.String(), tc.want)
		})
		// Consume is waiting at the end: a new record on partition 0 is
		// what it prints.
		rec := fmt.Sprintf("new%d", i)
		if _, _, err := runCLIStdin(rec+"\n", append(brokers, "produce", "st", "-p", "0")...); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || out.String() != rec+"\n" {
				t.Fatalf("%v: printed %q, error %v; stderr %q", tc.args, out.String(), err, errOut.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%v: still waiting 60s after %s was produced; stderr %q", tc.args, rec, errOut.String())
		}
	}
	// A start that needs no waiting says nothing.
	_, errOut, err := runCLIStdin("", append(brokers, "consume", "st", "-p", "1", "-n", "1")...)
	if err != nil || errOut != "" {
		t.Fatalf("consume from the start: %v, stderr %q", err, errOut)
	}
}

// TestCLIConsumeGroupStartsWhereResetSays: consume --group starts a
// partition its group never committed in where --reset says (latest: the
// end, waiting for new records), as a member and with -p alike, and says
// so; a partition with a commit starts there, said as such; --reset none
// refuses, naming the partition; -o, given, wins over --reset.
func TestCLIConsumeGroupStartsWhereResetSays(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	if _, _, err := runCLIStdin("", append(brokers, "topic", "create", "gs", "-p", "1")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLIStdin("a\nb\nc\n", append(brokers, "produce", "gs", "-p", "0")...); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "late-member", "--reset", "latest"},
			"group late-member: starting gs at 0:3 (partition:offset; no committed offset, so --reset latest: the log end, waiting for new records)"},
		{[]string{"--group", "late-manual", "-p", "0", "--reset", "latest"},
			"group late-manual: starting gs at 0:4 (partition:offset; no committed offset, so --reset latest: the log end, waiting for new records)"},
		// The run before committed what it printed.
		{[]string{"--group", "late-manual", "-p", "0", "--reset", "none"},
			"group late-manual: starting gs at 0:5 (partition:offset; the group's committed offsets)"},
	} {
		var out, errOut syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- runCLIWith(strings.NewReader(""), &out, &errOut, append(append(brokers, "consume", "gs", "-n", "1"), tc.args...)...)
		}()
		poll.True(t, fmt.Sprintf("%v to say where it starts", tc.args), func() bool {
			return strings.Contains(errOut.String(), tc.want)
		})
		rec := fmt.Sprintf("new%d", i)
		if _, _, err := runCLIStdin(rec+"\n", append(brokers, "produce", "gs", "-p", "0")...); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || out.String() != rec+"\n" {
				t.Fatalf("%v: printed %q, error %v; stderr %q", tc.args, out.String(), err, errOut.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%v: still waiting 60s after %s was produced; stderr %q", tc.args, rec, errOut.String())
		}
	}
	// --reset none with no commit: an error naming the partition.
	_, _, err := runCLIStdin("", append(brokers, "consume", "gs", "--group", "never", "-p", "0", "-n", "1", "--reset", "none")...)
	if err == nil || !strings.Contains(err.Error(), "group never has no committed offset for gs partition 0 and --reset is none") {
		t.Fatalf("--reset none without a commit: %v", err)
	}
	// -o given wins over --reset: from the start.
	out, errOut, err := runCLIStdin("", append(brokers, "consume", "gs", "--group", "fresh", "-p", "0", "-n", "1", "--reset", "latest", "-o", "start")...)
	if err != nil || out != "a\n" || !strings.Contains(errOut, "group fresh: starting gs at 0:0 (partition:offset; no committed offset, so -o start)") {
		t.Fatalf("-o start over --reset latest: printed %q, %v; stderr %q", out, err, errOut)
	}
}
