package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevCertsKeep: with --keep a second run leaves a complete directory
// untouched (the CA nodes trust stays), a partial one is refused naming
// what is missing, and without --keep the CA is replaced.
func TestDevCertsKeep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"dev", "certs", "--out", dir, "--nodes", "n1,n2", "--clients", "admin", "--keep"}
	if _, _, err := runCLIStdin("", args...); err != nil {
		t.Fatalf("first run: %v", err)
	}
	ca := readFile(t, filepath.Join(dir, "ca.pem"))
	for _, f := range []string{"ca-key.pem", "n1.pem", "n1-key.pem", "n2.pem", "n2-key.pem", "admin.pem", "admin-key.pem"} {
		readFile(t, filepath.Join(dir, f))
	}

	out, _, err := runCLIStdin("", args...)
	if err != nil {
		t.Fatalf("second run with --keep: %v", err)
	}
	if !strings.Contains(out, "kept") {
		t.Errorf("second run with --keep printed %q, want it to say the files were kept", out)
	}
	if got := readFile(t, filepath.Join(dir, "ca.pem")); got != ca {
		t.Fatal("--keep replaced ca.pem")
	}

	if err := os.Remove(filepath.Join(dir, "n2-key.pem")); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLIStdin("", args...)
	if err == nil || !strings.Contains(err.Error(), "n2-key.pem") {
		t.Fatalf("--keep on a partial directory: err %v, want one naming n2-key.pem", err)
	}
	if got := readFile(t, filepath.Join(dir, "ca.pem")); got != ca {
		t.Fatal("a refused --keep run replaced ca.pem")
	}

	if _, _, err := runCLIStdin("", args[:len(args)-1]...); err != nil {
		t.Fatalf("run without --keep: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "ca.pem")); got == ca {
		t.Fatal("without --keep the CA was not replaced")
	}
	readFile(t, filepath.Join(dir, "n2-key.pem"))
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty", name)
	}
	return string(b)
}
