package main

import (
	"strings"
	"testing"
)

// TestCLIUnknownSubcommand: a word that names no subcommand of topic,
// group or cluster fails, naming it and what it may have meant, instead
// of printing help and exiting 0; a group command alone fails too, with
// its help on standard error; --help still succeeds.
func TestCLIUnknownSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"topic", "lst"}, []string{`unknown command "lst" for "quire topic"`, "did you mean list?"}},
		{[]string{"group", "descrbe"}, []string{`unknown command "descrbe" for "quire group"`, "did you mean describe?"}},
		{[]string{"cluster", "typo"}, []string{`unknown command "typo" for "quire cluster"`, "features, info"}},
		{[]string{"typo"}, []string{`unknown command "typo" for "quire"`}},
		{[]string{"cluster"}, []string{`"quire cluster" needs a subcommand`}},
		{[]string{"help", "topc"}, []string{`unknown command "topc" for "quire"`, "did you mean topic?"}},
		{[]string{"help", "topic", "lst"}, []string{`unknown command "lst" for "quire topic"`}},
	} {
		out, errOut, err := runCLIStdin("", tc.args...)
		if err == nil {
			t.Errorf("%v: succeeded, printing %q", tc.args, out)
			continue
		}
		if exitCode(err) == 0 {
			t.Errorf("%v: exit status 0", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.args, err, w)
			}
		}
		if out != "" {
			t.Errorf("%v: printed %q on standard output", tc.args, out)
		}
		if len(tc.args) == 1 && tc.args[0] == "cluster" && !strings.Contains(errOut, "Available Commands") {
			t.Errorf("quire cluster: no help on standard error: %q", errOut)
		}
	}
	for _, args := range [][]string{{"topic", "--help"}, {"help", "topic"}} {
		out, _, err := runCLIStdin("", args...)
		if err != nil || !strings.Contains(out, "delete-records") {
			t.Fatalf("%v: %v, printed %q", args, err, out)
		}
	}
}
