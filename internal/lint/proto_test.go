package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProtoPublicNoProto3Optional keeps the public protos compiling with
// older protoc releases, such as the one bundled with Debian's
// python3-grpc-tools, which reject proto3 `optional`: a field with presence
// is a one-field oneof instead (scripts/e2e_python.sh compiles them with
// that protoc).
func TestProtoPublicNoProto3Optional(t *testing.T) {
	files, err := filepath.Glob("../../proto/quire/v1/*.proto")
	if err != nil || len(files) == 0 {
		t.Fatalf("no public protos found: %v", err)
	}
	optional := regexp.MustCompile(`^\s*optional\s`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if optional.MatchString(line) {
				t.Errorf("%s:%d: proto3 optional (use oneof optional_<name> { ... }): %s", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
}
