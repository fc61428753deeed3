package metadata

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFSMForbiddenImports keeps gRPC and the network out of the metadata
// package (DESIGN.md: the FSM and controller import no gRPC; the raft
// transport lives in raftgrpc). Its raft commands are generated into
// api/metapb, apart from the gRPC stubs of api/internalv1; internal/lint
// checks the transitive imports too. The group coordinator imports this
// package, never the other way round.
func TestFSMForbiddenImports(t *testing.T) {
	t.Parallel()
	forbidden := []string{"google.golang.org/grpc", "net", "net/http", "github.com/quirelog/quire/raftgrpc", "github.com/quirelog/quire/controlplane", "github.com/quirelog/quire/coordinator"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ast, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") && bad != "net" {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
