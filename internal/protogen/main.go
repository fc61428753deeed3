// Command protogen compiles the protobuf sources under proto/ without
// protoc or buf, and does the two things the build needs of them:
//
//	protogen generate -proto proto -out . -plugin bin/protoc-gen-go=module=M ...
//
// runs each code generator plugin on every .proto file through protoc's
// plugin protocol (a CodeGeneratorRequest on stdin, the response on stdout)
// and writes the files they return under -out; and
//
//	protogen breaking -proto proto -dir quire/v1 -against HEAD~1
//
// compares the files under -dir at the git revision -against with the
// working tree and lists every change that breaks the wire compatibility of
// the messages, enums and services they declare (see breaking.go), exiting
// 1 when there is one.
//
// The sources are compiled by github.com/bufbuild/protocompile, with
// protoc's standard imports (google/protobuf/*.proto) built in.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUsage is returned for a command line that cannot be run.
var ErrUsage = errors.New("protogen: usage")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, err)
	if errors.Is(err, errBreaking) {
		os.Exit(1)
	}
	os.Exit(2)
}

// pluginFlags collects repeated -plugin flags.
type pluginFlags []plugin

func (p *pluginFlags) String() string { return fmt.Sprint(*p) }

func (p *pluginFlags) Set(s string) error {
	pl, err := parsePlugin(s)
	if err != nil {
		return err
	}
	*p = append(*p, pl)
	return nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: protogen generate|breaking [flags] (-h for each one's flags)", ErrUsage)
	}
	switch args[0] {
	case "generate":
		return runGenerate(ctx, args[1:])
	case "breaking":
		return runBreaking(ctx, args[1:], stdout)
	default:
		return fmt.Errorf("%w: unknown command %q (want generate or breaking)", ErrUsage, args[0])
	}
}

func runGenerate(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("protogen generate", flag.ContinueOnError)
	root := fl.String("proto", "proto", "the root of the proto tree (imports are relative to it)")
	out := fl.String("out", ".", "the directory the generated files are written under")
	var plugins pluginFlags
	fl.Var(&plugins, "plugin", "a plugin to run, path[=parameter]; repeat for more")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fl.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %v", ErrUsage, fl.Args())
	}
	if len(plugins) == 0 {
		return fmt.Errorf("%w: no -plugin given", ErrUsage)
	}
	names, err := protoFiles(*root, ".")
	if err != nil {
		return err
	}
	c, err := compile(ctx, dirOpener(*root), names)
	if err != nil {
		return err
	}
	return generate(ctx, c, plugins, *out)
}

// errBreaking is returned when breaking changes were found (and printed).
var errBreaking = errors.New("protogen: breaking changes")

func runBreaking(ctx context.Context, args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("protogen breaking", flag.ContinueOnError)
	root := fl.String("proto", "proto", "the root of the proto tree, in the working tree and in git")
	dir := fl.String("dir", "quire/v1", "the directory under -proto whose files are compared")
	against := fl.String("against", "HEAD~1", "the git revision to compare the working tree with")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fl.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %v", ErrUsage, fl.Args())
	}
	prev, err := gitTree(ctx, *against, *root)
	if err != nil {
		return err
	}
	oldNames := prev.under(*dir)
	if len(oldNames) == 0 {
		fmt.Fprintf(stdout, "protogen: %s has no .proto files under %s/%s: nothing to compare\n", *against, *root, *dir)
		return nil
	}
	before, err := compile(ctx, prev.open, oldNames)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", *root, *against, err)
	}
	// The directory may be gone from the working tree: all of it removed.
	var newNames []string
	switch _, err := os.Stat(filepath.Join(*root, *dir)); {
	case err == nil:
		if newNames, err = protoFiles(*root, *dir); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("protogen: %w", err)
	}
	var after *compiled
	if len(newNames) > 0 {
		if after, err = compile(ctx, dirOpener(*root), newNames); err != nil {
			return err
		}
	}
	changes := breaking(before.filesUnder(*dir), after.filesUnder(*dir))
	for _, ch := range changes {
		fmt.Fprintln(stdout, ch)
	}
	if len(changes) > 0 {
		return fmt.Errorf("%w: %d against %s", errBreaking, len(changes), *against)
	}
	return nil
}

// filesUnder returns the compiled files asked for whose path is under dir.
// A nil c has none.
func (c *compiled) filesUnder(dir string) []fileDesc {
	if c == nil {
		return nil
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []fileDesc
	for _, name := range c.asked {
		if strings.HasPrefix(name, prefix) {
			out = append(out, c.byName[name])
		}
	}
	return out
}
