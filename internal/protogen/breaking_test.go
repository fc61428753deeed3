package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
)

// base is the previous version every breaking case edits.
const base = `syntax = "proto3";
package t.v1;

message Req {
  string name = 1;
  int32 count = 2;
  repeated string tags = 3;
  oneof pick {
    string a = 4;
    int64 b = 5;
  }
  Inner inner = 6;
  map<string, int32> sizes = 7;
  reserved 9;

  message Inner { int32 x = 1; }
}

message Resp { Kind kind = 1; }

message Extra { int32 v = 1; }

enum Kind {
  KIND_UNSPECIFIED = 0;
  KIND_A = 1;
  KIND_B = 2;
}

enum Level { LEVEL_UNSPECIFIED = 0; }

service S {
  rpc Get(Req) returns (Resp);
  rpc Watch(Req) returns (stream Resp);
}

service Other { rpc Ping(Req) returns (Resp); }
`

// mapOpener reads sources from memory.
func mapOpener(files map[string]string) opener {
	return func(path string) (io.ReadCloser, error) {
		src, ok := files[path]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return io.NopCloser(strings.NewReader(src)), nil
	}
}

// compileTree compiles inline sources and returns those under t/v1.
func compileTree(t *testing.T, files map[string]string) []fileDesc {
	t.Helper()
	c, err := compile(context.Background(), mapOpener(files), sortedKeys(files))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return c.filesUnder("t/v1")
}

// edit applies old→new replacements to base, failing if one does not
// match (the case would otherwise test nothing).
func edit(t *testing.T, repl ...string) string {
	t.Helper()
	src := base
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(src, repl[i]) {
			t.Fatalf("edit: %q not in the base source", repl[i])
		}
		src = strings.Replace(src, repl[i], repl[i+1], 1)
	}
	return src
}

func TestProtogenBreaking(t *testing.T) {
	cases := []struct {
		name  string
		repl  []string          // old, new, ... applied to base (t/v1/a.proto)
		extra map[string]string // more files of the new version
		want  []string          // one substring per change expected; none: compatible
	}{
		{name: "field added", repl: []string{"int32 count = 2;", "int32 count = 2;\n  bool more = 10;"}},
		{name: "rpc added", repl: []string{"rpc Get(Req) returns (Resp);", "rpc Get(Req) returns (Resp);\n  rpc Put(Req) returns (Resp);"}},
		{name: "message, enum value and service added", repl: []string{"KIND_B = 2;", "KIND_B = 2;\n  KIND_C = 3;", "message Extra", "message New { string s = 1; }\nservice Third { rpc P(New) returns (New); }\nmessage Extra"}},
		{name: "proto3 optional added", repl: []string{"int32 count = 2;", "optional int32 count = 2;"}},
		{name: "field removed with its number reserved", repl: []string{"int32 count = 2;", "reserved 2;"}},
		{name: "enum value removed with its number reserved", repl: []string{"KIND_B = 2;", "reserved 2;"}},
		{name: "message moved to another file of the package", repl: []string{"message Extra { int32 v = 1; }", ""},
			extra: map[string]string{"t/v1/b.proto": "syntax = \"proto3\";\npackage t.v1;\nmessage Extra { int32 v = 1; }\n"}},

		{name: "field removed", repl: []string{"int32 count = 2;", ""},
			want: []string{"message t.v1.Req: field 2 (count) removed without reserving its number"}},
		{name: "field removed, another number reserved", repl: []string{"int32 count = 2;", "reserved 3 to 5;", "repeated string tags = 3;", "", "oneof pick {\n    string a = 4;\n    int64 b = 5;\n  }", ""},
			want: []string{"field 2 (count) removed without"}},
		{name: "field renumbered", repl: []string{"int32 count = 2;", "int32 count = 8;"},
			want: []string{"message t.v1.Req: field count renumbered from 2 to 8"}},
		{name: "field number reused with another scalar type", repl: []string{"int32 count = 2;", "string count = 2;"},
			want: []string{"field 2 (count) changed type from int32 to string"}},
		{name: "field number reused with another message type", repl: []string{"Inner inner = 6;", "Resp inner = 6;"},
			want: []string{"field 6 (inner) changed type from message t.v1.Req.Inner to message t.v1.Resp"}},
		{name: "field made singular", repl: []string{"repeated string tags = 3;", "string tags = 3;"},
			want: []string{"field 3 (tags) changed from repeated to singular"}},
		{name: "field moved into a oneof", repl: []string{"int32 count = 2;\n", "", "oneof pick {", "oneof pick {\n    int32 count = 2;"},
			want: []string{"field 2 (count) moved from no oneof to oneof pick"}},
		{name: "field renamed", repl: []string{"string name = 1;", "string title = 1;"},
			want: []string{`field 1 renamed from name (JSON "name") to title (JSON "title")`}},
		{name: "map value type changed", repl: []string{"map<string, int32> sizes = 7;", "map<string, int64> sizes = 7;"},
			want: []string{"message t.v1.Req.SizesEntry: field 2 (value) changed type from int32 to int64"}},
		{name: "message removed", repl: []string{"message Extra { int32 v = 1; }", ""},
			want: []string{"t/v1/a.proto: message t.v1.Extra removed"}},
		{name: "nested message removed with its field", repl: []string{"Inner inner = 6;", "", "message Inner { int32 x = 1; }", ""},
			want: []string{"field 6 (inner) removed without", "message t.v1.Req.Inner removed"}},
		{name: "enum removed", repl: []string{"enum Level { LEVEL_UNSPECIFIED = 0; }", ""},
			want: []string{"enum t.v1.Level removed"}},
		{name: "enum value removed", repl: []string{"KIND_B = 2;", ""},
			want: []string{"enum t.v1.Kind: value 2 (KIND_B) removed without reserving its number"}},
		{name: "enum value renamed", repl: []string{"KIND_B = 2;", "KIND_BEE = 2;"},
			want: []string{"enum t.v1.Kind: value 2 renamed from KIND_B to KIND_BEE"}},
		{name: "rpc removed", repl: []string{"rpc Watch(Req) returns (stream Resp);", ""},
			want: []string{"rpc t.v1.S.Watch removed"}},
		{name: "service removed", repl: []string{"service Other { rpc Ping(Req) returns (Resp); }", ""},
			want: []string{"service t.v1.Other removed"}},
		{name: "rpc request changed", repl: []string{"rpc Get(Req)", "rpc Get(Extra)"},
			want: []string{"rpc t.v1.S.Get: request changed from t.v1.Req to t.v1.Extra"}},
		{name: "rpc response changed", repl: []string{"rpc Get(Req) returns (Resp)", "rpc Get(Req) returns (Extra)"},
			want: []string{"rpc t.v1.S.Get: response changed from t.v1.Resp to t.v1.Extra"}},
		{name: "rpc client streaming added", repl: []string{"rpc Get(Req)", "rpc Get(stream Req)"},
			want: []string{"rpc t.v1.S.Get: client streaming changed from false to true"}},
		{name: "rpc server streaming removed", repl: []string{"returns (stream Resp)", "returns (Resp)"},
			want: []string{"rpc t.v1.S.Watch: server streaming changed from true to false"}},
		{name: "package changed", repl: []string{"package t.v1;", "package t.v2;"},
			want: []string{`t/v1/a.proto: package changed from "t.v1" to "t.v2"`}},
	}
	before := compileTree(t, map[string]string{"t/v1/a.proto": base})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"t/v1/a.proto": edit(t, tc.repl...)}
			for name, src := range tc.extra {
				files[name] = src
			}
			got := breaking(before, compileTree(t, files))
			if len(got) != len(tc.want) {
				t.Fatalf("got %d changes, want %d (%q):\n%s", len(got), len(tc.want), tc.want, changesText(got))
			}
			for _, w := range tc.want {
				if !strings.Contains(changesText(got), w) {
					t.Errorf("no change says %q; got:\n%s", w, changesText(got))
				}
			}
		})
	}
}

func changesText(cs []change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestProtogenBreakingFileRemoved: with the whole directory gone, every
// type it declared is reported.
func TestProtogenBreakingFileRemoved(t *testing.T) {
	got := changesText(breaking(compileTree(t, map[string]string{"t/v1/a.proto": base}), nil))
	for _, w := range []string{"message t.v1.Req removed", "message t.v1.Req.Inner removed", "enum t.v1.Kind removed", "service t.v1.S removed"} {
		if !strings.Contains(got, w) {
			t.Errorf("no change says %q; got:\n%s", w, got)
		}
	}
	if strings.Contains(got, "SizesEntry") {
		t.Errorf("a map entry is reported apart from its field:\n%s", got)
	}
}

// TestProtogenBreakingPublicProtos: the project's own public protos compile
// and compare equal with themselves.
func TestProtogenBreakingPublicProtos(t *testing.T) {
	names, err := protoFiles("../../proto", "quire/v1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := compile(context.Background(), dirOpener("../../proto"), names)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	files := c.filesUnder("quire/v1")
	if len(files) != len(names) || len(files) == 0 {
		t.Fatalf("%d files under quire/v1 compiled, %d listed", len(files), len(names))
	}
	if got := breaking(files, files); len(got) != 0 {
		t.Errorf("the protos break against themselves:\n%s", changesText(got))
	}
}

func TestProtogenCompileError(t *testing.T) {
	_, err := compile(context.Background(), mapOpener(map[string]string{"t/v1/a.proto": "syntax = \"proto3\";\nmessage M { int32 x = 1; string x = 2; }\n"}), []string{"t/v1/a.proto"})
	if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "t/v1/a.proto:2") {
		t.Fatalf("compile of a duplicate field: %v, want ErrCompile naming t/v1/a.proto:2", err)
	}
	if _, err := compile(context.Background(), mapOpener(map[string]string{}), []string{"t/v1/missing.proto"}); !errors.Is(err, ErrCompile) {
		t.Fatalf("compile of a missing file: %v, want ErrCompile", err)
	}
}
