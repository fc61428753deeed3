package group

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A small reader of test scripts in the style of cockroachdb/datadriven:
// a script is a series of cases, each a command line, a line "----", and
// the expected output up to the next blank line. Lines starting with #
// between cases are comments. Arguments are key=value; a value in double
// quotes is unquoted as a Go string. With -rewrite the files are written back
// with the output the code gives.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

type scriptCase struct {
	pos  string // file:line of the command
	cmd  string
	args []scriptArg
	want string
	// line range of the expected output in the file, for -rewrite
	from, to int
}

type scriptArg struct {
	key, val string
	hasVal   bool
}

func parseScript(t *testing.T, path string) ([]string, []scriptCase) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var cases []scriptCase
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := scriptCase{pos: fmt.Sprintf("%s:%d", filepath.Base(path), i+1)}
		fields := strings.Fields(line)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if strings.HasPrefix(v, `"`) {
				uq, err := strconv.Unquote(v)
				if err != nil {
					t.Fatalf("%s: %s: %v", c.pos, f, err)
				}
				v = uq
			}
			c.args = append(c.args, scriptArg{key: k, val: v, hasVal: ok})
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: command without a ---- line after it", c.pos)
		}
		c.from = i + 1
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.to = i
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return lines, cases
}

// runScript runs every case of the script at path through do, which
// returns the output of one command.
func runScript(t *testing.T, path string, do func(t *testing.T, c *scriptCase) string) {
	t.Helper()
	lines, cases := parseScript(t, path)
	var out []string
	last := 0
	for i := range cases {
		c := &cases[i]
		got := strings.TrimRight(do(t, c), "\n")
		if t.Failed() {
			t.Fatalf("%s: %s failed", c.pos, c.cmd)
		}
		if *rewrite {
			out = append(out, lines[last:c.from]...)
			if got != "" {
				out = append(out, strings.Split(got, "\n")...)
			}
			last = c.to
			continue
		}
		if got != c.want {
			t.Fatalf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, c.cmd, got, c.want)
		}
	}
	if *rewrite {
		out = append(out, lines[last:]...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *scriptCase) arg(key string) (string, bool) {
	for _, a := range c.args {
		if a.key == key {
			return a.val, true
		}
	}
	return "", false
}

// known fails the test when the case has an argument not in keys.
func (c *scriptCase) known(t *testing.T, keys ...string) {
	t.Helper()
	for _, a := range c.args {
		ok := false
		for _, k := range keys {
			ok = ok || a.key == k
		}
		if !ok {
			t.Fatalf("%s: %s: unknown argument %q", c.pos, c.cmd, a.key)
		}
	}
}
