package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ErrCompile is returned when the sources do not compile; the wrapped error
// names the file, line and column.
var ErrCompile = errors.New("protogen: compile")

// opener reads one source file by its import path (relative to the root of
// the proto tree, e.g. "quire/v1/admin.proto").
type opener func(path string) (io.ReadCloser, error)

// dirOpener reads sources from a directory on disk.
func dirOpener(root string) opener {
	return func(path string) (io.ReadCloser, error) {
		return os.Open(filepath.Join(root, filepath.FromSlash(path)))
	}
}

// compiled is the result of one compilation: the descriptors of every file
// asked for and of all they import, dependencies before their dependents
// (the order a CodeGeneratorRequest's proto_file needs).
type compiled struct {
	files  []*descriptorpb.FileDescriptorProto          // topological order
	byName map[string]*descriptorpb.FileDescriptorProto // every file above
	asked  []string                                     // the files named, sorted
}

// compile compiles the named files (import paths, relative to the tree open
// reads) with protoc's standard imports (google/protobuf/*.proto) available,
// keeping comments (source info) as protoc does for its plugins.
func compile(ctx context.Context, open opener, names []string) (*compiled, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no .proto files", ErrCompile)
	}
	asked := append([]string(nil), names...)
	sort.Strings(asked)
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: open}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(ctx, asked...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	out := &compiled{byName: map[string]*descriptorpb.FileDescriptorProto{}, asked: asked}
	var visit func(f protoreflect.FileDescriptor)
	visit = func(f protoreflect.FileDescriptor) {
		if _, done := out.byName[f.Path()]; done {
			return
		}
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			visit(imports.Get(i).FileDescriptor)
		}
		fd := protoutil.ProtoFromFileDescriptor(f)
		out.byName[f.Path()] = fd
		out.files = append(out.files, fd)
	}
	for _, f := range files {
		visit(f)
	}
	return out, nil
}

// protoFiles lists the .proto files under dir (relative to root, both on
// disk), as import paths relative to root, sorted.
func protoFiles(root, dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".proto") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("protogen: list %s: %w", filepath.Join(root, dir), err)
	}
	sort.Strings(names)
	return names, nil
}
