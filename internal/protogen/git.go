package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ErrGit is returned when the proto tree cannot be read at a revision.
var ErrGit = errors.New("protogen: git")

// revTree is the proto tree as it was at a git revision.
type revTree struct {
	ctx   context.Context
	rev   string
	root  string   // the tree's directory, relative to the working directory
	names []string // its .proto files, relative to root, sorted
}

// gitTree lists the .proto files under root (a directory of the working
// tree, relative to the working directory) at revision rev.
func gitTree(ctx context.Context, rev, root string) (*revTree, error) {
	root = filepath.ToSlash(filepath.Clean(root))
	out, err := git(ctx, "ls-tree", "-r", "-z", "--name-only", rev, "--", root)
	if err != nil {
		return nil, err
	}
	t := &revTree{ctx: ctx, rev: rev, root: root}
	for _, p := range strings.Split(string(out), "\x00") {
		if !strings.HasSuffix(p, ".proto") {
			continue
		}
		rel, ok := strings.CutPrefix(p, root+"/")
		if root == "." {
			rel, ok = p, true
		}
		if ok {
			t.names = append(t.names, rel)
		}
	}
	sort.Strings(t.names)
	return t, nil
}

// under returns the tree's files under dir (relative to the root).
func (t *revTree) under(dir string) []string {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []string
	for _, n := range t.names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// open reads one file of the tree at the revision; it is an opener.
func (t *revTree) open(name string) (io.ReadCloser, error) {
	i := sort.SearchStrings(t.names, name)
	if i == len(t.names) || t.names[i] != name {
		return nil, fs.ErrNotExist
	}
	src, err := git(t.ctx, "show", t.rev+":./"+path.Join(t.root, name))
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(src)), nil
}

func git(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: git %s: %w: %s", ErrGit, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
