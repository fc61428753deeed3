package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock is one fenced shell block of README.md, with the e2e mark
// (`<!-- e2e: NAME -->`) on the line before it, if any.
type readmeBlock struct {
	mark  string
	lines []string
	line  int // of the opening fence, 1-based
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	markRe := regexp.MustCompile(`^<!-- e2e: ([a-z]+) -->$`)
	var blocks []readmeBlock
	var cur *readmeBlock
	mark := ""
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```sh"):
			cur = &readmeBlock{mark: mark, line: i + 1}
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		default:
			mark = ""
			if m := markRe.FindStringSubmatch(line); m != nil {
				mark = m[1]
			}
		}
	}
	return blocks
}

// TestReadmeExamplesRunByE2E keeps the README's commands honest: every
// shell block but the first (make run, make test) is marked and run
// exactly as printed by an end-to-end script (`run_readme_block NAME`),
// which `make test` runs; the commands name bin/quire and bin/grpcurl, the
// paths `make build tools` fills, not commands a fresh clone lacks.
func TestReadmeExamplesRunByE2E(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) < 4 {
		t.Fatalf("found %d shell blocks in README.md", len(blocks))
	}
	first := strings.Join(blocks[0].lines, "\n")
	if !strings.HasPrefix(first, "make run") || !strings.Contains(first, "make test") {
		t.Errorf("README.md's first block must give make run and make test:\n%s", first)
	}
	// make run is checked as printed by scripts/e2e_make_run.sh, which
	// make test must run: its e2e-stage runs the end-to-end scripts'
	// targets, $(E2E_SCRIPTS), and e2e-make-run, among them, runs it.
	// make test is what .ci/run runs.
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range []struct{ re, what string }{
		{`(?m)^test:[^\n]*(?:\n\t[^\n]*)*?\be2e-stage\b`, "make test does not run e2e-stage"},
		{`(?m)^e2e-stage:.*\n\t.*\$\(E2E_SCRIPTS\)`, "e2e-stage does not run $(E2E_SCRIPTS)"},
		{`(?m)^E2E_SCRIPTS :=(?:.*\\\n)*.*\be2e-make-run\b`, "E2E_SCRIPTS does not name e2e-make-run"},
		{`(?m)^e2e-make-run:.*\n\t.*scripts/e2e_make_run\.sh`, "e2e-make-run does not run scripts/e2e_make_run.sh"},
	} {
		if !regexp.MustCompile(rule.re).Match(makefile) {
			t.Errorf("%s, so nothing checks the README's make run", rule.what)
		}
	}
	if ci, err := os.ReadFile("../../.ci/run"); err != nil || !regexp.MustCompile(`(?m)^[^#]*\bmake test\b`).Match(ci) {
		t.Errorf(".ci/run does not run make test (err %v)", err)
	}
	var scripts strings.Builder
	files, _ := filepath.Glob("../../scripts/*.sh")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		scripts.Write(b)
	}
	bare := regexp.MustCompile(`(^|[|;&]\s*)(grpcurl|quire)\s`)
	marks := map[string]bool{}
	for _, b := range blocks[1:] {
		if b.mark == "" {
			t.Errorf("README.md:%d: shell block not marked <!-- e2e: NAME --> (so no script runs it)", b.line)
			continue
		}
		if marks[b.mark] {
			t.Errorf("README.md:%d: e2e mark %q used twice", b.line, b.mark)
		}
		marks[b.mark] = true
		if !regexp.MustCompile(`run_readme_block ` + b.mark + `\b`).MatchString(scripts.String()) {
			t.Errorf("README.md:%d: block %q is run by no script (run_readme_block %s)", b.line, b.mark, b.mark)
		}
		for i, line := range b.lines {
			if bare.MatchString(line) {
				t.Errorf("README.md:%d: %q: write bin/grpcurl or bin/quire, what `make build tools` installs", b.line+1+i, line)
			}
		}
	}
	var grpcurl []string
	for _, b := range blocks {
		if b.mark == "grpcurl" {
			grpcurl = b.lines
		}
	}
	methods := regexp.MustCompile(`(?:quire\.v1|grpc\.health\.v1)\.[A-Za-z]+/[A-Za-z]+`).FindAllString(strings.Join(grpcurl, "\n"), -1)
	if len(methods) < 5 {
		t.Fatalf("found only %d grpcurl methods in README.md's grpcurl block", len(methods))
	}
}

// TestReadmeSaysWhatMakeTestInstalls: the README's opening, where `make
// test` is introduced, names every package the scripts install with
// apt-get and every tool scripts/tools.sh puts into ./bin, so that running
// the tests installs nothing the README does not say.
func TestReadmeSaysWhatMakeTestInstalls(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	intro, _, _ := strings.Cut(string(data), "\n## ")
	want := map[string]string{}
	files, _ := filepath.Glob("../../scripts/*.sh")
	aptInstall := regexp.MustCompile(`apt-get install((?:[ \t]+[-a-z0-9.+]+)+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range aptInstall.FindAllStringSubmatch(string(b), -1) {
			for _, pkg := range strings.Fields(m[1]) {
				if !strings.HasPrefix(pkg, "-") {
					want[pkg] = filepath.Base(f) + " (apt-get)"
				}
			}
		}
	}
	tools, err := os.ReadFile("../../scripts/tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	order := regexp.MustCompile(`(?m)^order=\(([^)]*)\)`).FindSubmatch(tools)
	if order == nil {
		t.Fatal("scripts/tools.sh has no order=(...) list of its tools")
	}
	for _, tool := range strings.Fields(string(order[1])) {
		want[tool] = "tools.sh"
	}
	if len(want) < 8 {
		t.Fatalf("found only %d installed packages and tools: %v", len(want), want)
	}
	for name, from := range want {
		if !strings.Contains(intro, "`"+name+"`") {
			t.Errorf("README.md's opening does not say that make test installs `%s` (%s)", name, from)
		}
	}
}
