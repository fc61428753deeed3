package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"
)

// With PROTOGEN_TEST_PLUGIN set, the test binary is a plugin instead: it
// writes one file saying what its request held, or, for "fail", answers
// an error.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PROTOGEN_TEST_PLUGIN"); mode != "" {
		os.Exit(fakePlugin(mode))
	}
	os.Exit(m.Run())
}

func fakePlugin(mode string) int {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return 3
	}
	req := &pluginpb.CodeGeneratorRequest{}
	if err := proto.Unmarshal(in, req); err != nil {
		return 4
	}
	resp := &pluginpb.CodeGeneratorResponse{}
	switch mode {
	case "fail":
		resp.Error = proto.String("cannot generate " + strings.Join(req.FileToGenerate, ","))
	case "escape":
		resp.File = []*pluginpb.CodeGeneratorResponse_File{{Name: proto.String("../outside.txt"), Content: proto.String("x")}}
	default:
		var b strings.Builder
		fmt.Fprintf(&b, "generate %s\n", strings.Join(req.FileToGenerate, " "))
		for _, f := range req.ProtoFile {
			fmt.Fprintf(&b, "file %s comments=%t\n", f.GetName(), f.GetSourceCodeInfo() != nil)
		}
		fmt.Fprintf(&b, "parameter %q compiler_version_set=%t\n", req.GetParameter(), req.CompilerVersion != nil)
		resp.File = []*pluginpb.CodeGeneratorResponse_File{{Name: proto.String("out/" + mode + ".txt"), Content: proto.String(b.String())}}
	}
	out, err := proto.Marshal(resp)
	if err != nil {
		return 5
	}
	os.Stdout.Write(out)
	return 0
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProtogenGenerate runs the test binary as a plugin: it is asked for
// every file, given them after what they import (the standard imports
// included), with comments, the parameter, and no compiler version (so
// generated headers say "(unknown)").
func TestProtogenGenerate(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "proto"), map[string]string{
		"b/v1/b.proto": "syntax = \"proto3\";\npackage b.v1;\nimport \"a/v1/a.proto\";\nimport \"google/protobuf/timestamp.proto\";\n// B says.\nmessage B { a.v1.A a = 1; google.protobuf.Timestamp at = 2; }\n",
		"a/v1/a.proto": "syntax = \"proto3\";\npackage a.v1;\nmessage A { int32 x = 1; }\n",
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROTOGEN_TEST_PLUGIN", "one")
	out := filepath.Join(dir, "gen")
	err = run(context.Background(), []string{"generate", "-proto", filepath.Join(dir, "proto"), "-out", out, "-plugin", self + "=module=example.com/m,x=y"}, io.Discard)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "one.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := `generate a/v1/a.proto b/v1/b.proto
file a/v1/a.proto comments=true
file google/protobuf/timestamp.proto comments=false
file b/v1/b.proto comments=true
parameter "module=example.com/m,x=y" compiler_version_set=false
`
	if string(got) != want {
		t.Errorf("the plugin was sent:\n%s\nwant:\n%s", got, want)
	}

	t.Setenv("PROTOGEN_TEST_PLUGIN", "fail")
	err = run(context.Background(), []string{"generate", "-proto", filepath.Join(dir, "proto"), "-out", out, "-plugin", self}, io.Discard)
	if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "cannot generate a/v1/a.proto,b/v1/b.proto") {
		t.Errorf("a plugin answering an error: %v, want ErrPlugin with its message", err)
	}

	t.Setenv("PROTOGEN_TEST_PLUGIN", "escape")
	err = run(context.Background(), []string{"generate", "-proto", filepath.Join(dir, "proto"), "-out", out, "-plugin", self}, io.Discard)
	if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "../outside.txt") {
		t.Errorf("a plugin writing outside -out: %v, want ErrPlugin naming the file", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "outside.txt")); err == nil {
		t.Errorf("a file was written outside -out")
	}
}

func TestProtogenUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"compile"}, {"generate"}, {"generate", "-plugin", "=x"}, {"breaking", "extra"}} {
		if err := run(context.Background(), args, io.Discard); !errors.Is(err, ErrUsage) && !errors.Is(err, ErrPlugin) {
			t.Errorf("run %q: %v, want a usage error", args, err)
		}
	}
}

// TestProtogenBreakingAgainstRevision reads the previous version out of
// git: a repository whose last commit has the base protos, changed in its
// working tree.
func TestProtogenBreakingAgainstRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "-q")
	gitRun("commit", "-q", "--allow-empty", "-m", "empty")
	writeTree(t, "proto", map[string]string{"t/v1/a.proto": base, "t/internal/i.proto": "syntax = \"proto3\";\npackage t.internal;\nmessage I { int32 x = 1; }\n"})
	var out bytes.Buffer
	args := []string{"breaking", "-proto", "proto", "-dir", "t/v1", "-against", "HEAD"}
	if err := run(context.Background(), args, &out); err != nil || !strings.Contains(out.String(), "nothing to compare") {
		t.Fatalf("against a revision without protos: %v, %q; want nothing to compare", err, out.String())
	}
	gitRun("add", "proto")
	gitRun("commit", "-q", "-m", "protos")

	// Compatible: a field added; the internal file (not under -dir) broken.
	writeTree(t, "proto", map[string]string{"t/v1/a.proto": edit(t, "int32 count = 2;", "int32 count = 2;\n  bool more = 10;"), "t/internal/i.proto": "syntax = \"proto3\";\npackage t.internal;\n"})
	out.Reset()
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatalf("a compatible change: %v\n%s", err, out.String())
	}

	writeTree(t, "proto", map[string]string{"t/v1/a.proto": edit(t, "int32 count = 2;", "")})
	out.Reset()
	err := run(context.Background(), args, &out)
	if !errors.Is(err, errBreaking) || !strings.Contains(out.String(), "t/v1/a.proto: message t.v1.Req: field 2 (count) removed without reserving its number") {
		t.Fatalf("a field removed: %v\n%s", err, out.String())
	}

	if err := os.RemoveAll(filepath.Join("proto", "t", "v1")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), args, &out); !errors.Is(err, errBreaking) || !strings.Contains(out.String(), "service t.v1.S removed") {
		t.Fatalf("the directory removed: %v\n%s", err, out.String())
	}

	if err := run(context.Background(), []string{"breaking", "-against", "no-such-rev"}, io.Discard); !errors.Is(err, ErrGit) {
		t.Errorf("an unknown revision: %v, want ErrGit", err)
	}
}
