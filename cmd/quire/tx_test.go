package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker/brokertest"
)

// TestCLITransactions: produce --transactional-id commits every line at
// once, --abort none; consume --isolation read_committed reads only the
// committed lines, read_uncommitted every one; tx describe and list show
// the transactional id, tx abort fences its producer (the epoch moves).
func TestCLITransactions(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	run := func(stdin string, args ...string) (string, string) {
		t.Helper()
		out, errOut, err := runCLIStdin(stdin, append(append([]string{}, brokers...), args...)...)
		if err != nil {
			t.Fatalf("quire %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		return out, errOut
	}
	run("", "topic", "create", "tt", "-p", "1")
	if _, errOut := run("aborted-1\naborted-2\n", "produce", "tt", "--transactional-id", "cli-tx", "--abort"); !strings.Contains(errOut, "aborted") {
		t.Fatalf("produce --abort said %q", errOut)
	}
	if _, errOut := run("one\ntwo\nthree\n", "produce", "tt", "--transactional-id", "cli-tx"); !strings.Contains(errOut, "committed 3 records") {
		t.Fatalf("produce --transactional-id said %q", errOut)
	}
	out, _ := run("", "consume", "tt", "--isolation", "read_committed", "-n", "3")
	if out != "one\ntwo\nthree\n" {
		t.Fatalf("read_committed read %q", out)
	}
	out, _ = run("", "consume", "tt", "-n", "5")
	if out != "aborted-1\naborted-2\none\ntwo\nthree\n" {
		t.Fatalf("read_uncommitted read %q", out)
	}
	if _, _, err := runCLIStdin("", append(append([]string{}, brokers...), "consume", "tt", "--isolation", "serializable")...); err == nil {
		t.Fatal("a bad --isolation was taken")
	}

	var desc []struct {
		ID    string `json:"transactional_id"`
		State string `json:"state"`
		Epoch int16  `json:"producer_epoch"`
	}
	out, _ = run("", "--format", "json", "tx", "describe", "cli-tx")
	if err := json.Unmarshal([]byte(out), &desc); err != nil || len(desc) != 1 || desc[0].State != "CompleteCommit" {
		t.Fatalf("tx describe: %q, %v", out, err)
	}
	before := desc[0].Epoch
	if out, _ = run("", "tx", "list"); !strings.Contains(out, "cli-tx") || !strings.Contains(out, "CompleteCommit") {
		t.Fatalf("tx list: %q", out)
	}
	out, _ = run("", "--format", "json", "tx", "abort", "cli-tx")
	if err := json.Unmarshal([]byte(out), &desc); err != nil || len(desc) != 1 || desc[0].Epoch <= before {
		t.Fatalf("tx abort: %q (epoch before %d), %v", out, before, err)
	}
	if _, _, err := runCLIStdin("", append(append([]string{}, brokers...), "tx", "describe", "nope")...); err == nil {
		t.Fatal("tx describe of an unknown id succeeded")
	}
}

// TestCLITransactionsEveryN: --tx-records N commits one transaction every
// N lines and the rest at the end, each said; an input ending on a
// transaction's last line ends no empty one; a bad or lone --tx-records is
// refused.
func TestCLITransactionsEveryN(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	brokers := []string{"--brokers", b.Addr()}
	run := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		return runCLIStdin(stdin, append(append([]string{}, brokers...), args...)...)
	}
	if _, _, err := run("", "topic", "create", "tn", "-p", "1"); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := run("a\nb\nc\nd\ne\n", "produce", "tn", "--transactional-id", "cli-txn", "--tx-records", "2")
	want := "committed 2 records (transaction 1)\ncommitted 2 records (transaction 2)\ncommitted 1 records (transaction 3)\n"
	if err != nil || !strings.Contains(errOut, want) {
		t.Fatalf("produce --tx-records 2 of 5 lines: %v, said %q, want %q", err, errOut, want)
	}
	_, errOut, err = run("f\ng\n", "produce", "tn", "--transactional-id", "cli-txn", "--tx-records", "2")
	if err != nil || !strings.Contains(errOut, "committed 2 records (transaction 1)\n") || strings.Contains(errOut, "transaction 2") {
		t.Fatalf("produce --tx-records 2 of 2 lines: %v, said %q", err, errOut)
	}
	out, _, err := run("", "consume", "tn", "--isolation", "read_committed", "-n", "7")
	if err != nil || out != "a\nb\nc\nd\ne\nf\ng\n" {
		t.Fatalf("read_committed read %q, %v", out, err)
	}
	for _, args := range [][]string{
		{"produce", "tn", "--tx-records", "2"},
		{"produce", "tn", "--transactional-id", "cli-txn", "--tx-records", "-1"},
	} {
		if _, _, err := run("x\n", args...); err == nil || !strings.Contains(err.Error(), "--tx-records") {
			t.Errorf("quire %s: %v, want a refusal naming --tx-records", strings.Join(args, " "), err)
		}
	}
}
