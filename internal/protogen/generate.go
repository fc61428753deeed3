package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// ErrPlugin is returned when a code generator plugin fails, answers
// something that is not a CodeGeneratorResponse, or reports an error.
var ErrPlugin = errors.New("protogen: plugin")

// plugin is one code generator run through protoc's plugin protocol: a
// CodeGeneratorRequest on its stdin, a CodeGeneratorResponse on its stdout.
type plugin struct {
	path  string // the executable
	param string // CodeGeneratorRequest.parameter (protoc's --<name>_opt)
}

// parsePlugin reads a -plugin flag: the executable's path, then optionally
// "=" and the parameter, e.g. "bin/protoc-gen-go=module=example.com/m".
func parsePlugin(s string) (plugin, error) {
	path, param, _ := strings.Cut(s, "=")
	if path == "" {
		return plugin{}, fmt.Errorf("%w: %q names no executable (want path[=parameter])", ErrPlugin, s)
	}
	return plugin{path: path, param: param}, nil
}

// request is what protoc sends a plugin for the compiled files: every file
// asked for is to be generated, and proto_file holds them with all their
// imports, dependencies first. The compiler version is left unset, so the
// generated headers say "protoc (unknown)".
func request(c *compiled, param string) *pluginpb.CodeGeneratorRequest {
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: append([]string(nil), c.asked...),
		ProtoFile:      make([]*descriptorpb.FileDescriptorProto, len(c.files)),
	}
	if param != "" {
		req.Parameter = proto.String(param)
	}
	copy(req.ProtoFile, c.files)
	return req
}

// run runs the plugin on req and returns its response, or the error it
// reports.
func (p plugin) run(ctx context.Context, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: encode request: %w", ErrPlugin, err)
	}
	cmd := exec.CommandContext(ctx, p.path)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w: %s", ErrPlugin, p.path, err, strings.TrimSpace(stderr.String()))
	}
	resp := &pluginpb.CodeGeneratorResponse{}
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("%w: %s: decode response: %w", ErrPlugin, p.path, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrPlugin, p.path, resp.GetError())
	}
	return resp, nil
}

// writeFiles writes a response's files under out. Insertion points (adding
// to a file another plugin wrote) are not supported; no plugin here uses
// them. A name that would leave out is refused.
func writeFiles(out string, resp *pluginpb.CodeGeneratorResponse) error {
	for _, f := range resp.File {
		name := f.GetName()
		if f.GetInsertionPoint() != "" {
			return fmt.Errorf("%w: %s: insertion point %q not supported", ErrPlugin, name, f.GetInsertionPoint())
		}
		if name == "" || !filepath.IsLocal(filepath.FromSlash(name)) {
			return fmt.Errorf("%w: output file name %q is not a relative path inside the output directory", ErrPlugin, name)
		}
		path := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("protogen: %w", err)
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return fmt.Errorf("protogen: %w", err)
		}
	}
	return nil
}

// generate runs each plugin on the compiled files and writes what they
// produce under out.
func generate(ctx context.Context, c *compiled, plugins []plugin, out string) error {
	for _, p := range plugins {
		resp, err := p.run(ctx, request(c, p.param))
		if err != nil {
			return err
		}
		if err := writeFiles(out, resp); err != nil {
			return err
		}
	}
	return nil
}
