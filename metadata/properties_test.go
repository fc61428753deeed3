package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMetaPropertiesRefuseAnotherNode: the metadata directory's
// meta.properties names its node and cluster; opening it as another node
// or cluster is refused, and a node.id that does not fit an int32 is an
// error rather than the id it would wrap round to.
func TestMetaPropertiesRefuseAnotherNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := checkProperties(dir, 1, "c1"); err != nil {
		t.Fatalf("no file yet: %v", err)
	}
	if err := writeProperties(dir, properties{NodeID: 1, ClusterID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if p, err := checkProperties(dir, 1, "c1"); err != nil || p != (properties{NodeID: 1, ClusterID: "c1"}) {
		t.Fatalf("own dir: %+v %v", p, err)
	}
	if _, err := checkProperties(dir, 2, "c1"); err == nil || !strings.Contains(err.Error(), "belongs to node 1") {
		t.Fatalf("as node 2: %v", err)
	}
	if _, err := checkProperties(dir, 1, "c2"); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("as cluster c2: %v", err)
	}

	// 2^32 + 1 would be node 1 cut to 32 bits.
	for _, id := range []string{"4294967297", "-2147483649", "1x", ""} {
		if err := os.WriteFile(filepath.Join(dir, propertiesFile), []byte("version=1\nnode.id="+id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if p, err := checkProperties(dir, 1, ""); err == nil || !strings.Contains(err.Error(), "bad node.id") {
			t.Fatalf("node.id=%s: %+v %v", id, p, err)
		}
	}
}

// FuzzMetaPropertiesNode: the metadata directory's meta.properties, as a
// crash or an operator may have left it. The parser never panics; what it
// accepts is written back as a file that reads back the same; a node id
// it returns is the number the file holds.
func FuzzMetaPropertiesNode(f *testing.F) {
	f.Add(formatProperties(properties{NodeID: 3, ClusterID: "abc"}))
	f.Add([]byte("# c\nversion=1\nnode.id=1\n"))
	f.Add([]byte("node.id = 7 \r\ncluster.id= x y \nother=1\nno equals\n"))
	f.Add([]byte("node.id=4294967297\n"))
	f.Add([]byte("node.id=+5\nnode.id=-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProperties(data)
		if err != nil {
			return
		}
		back, err := parseProperties(formatProperties(p))
		if err != nil {
			t.Fatalf("%q parsed as %+v, written back unreadable: %v", data, p, err)
		}
		if back != p {
			t.Fatalf("%q parsed as %+v, written back and read as %+v", data, p, back)
		}
		if p.NodeID == -1 {
			return
		}
		// The last node.id line holds the number returned.
		var last string
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.TrimSpace(k) == "node.id" && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				last = strings.TrimSpace(v)
			}
		}
		if n, err := strconv.ParseInt(last, 10, 64); err != nil || n != int64(p.NodeID) {
			t.Fatalf("%q: node id %d, the file says %q", data, p.NodeID, last)
		}
	})
}
