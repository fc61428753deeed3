package metadata

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// properties is <Dir>/meta.properties, as Kafka writes in each log dir.
type properties struct {
	NodeID    int32
	ClusterID string
}

const propertiesFile = "meta.properties"

func readProperties(dir string) (properties, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, propertiesFile))
	if errors.Is(err, os.ErrNotExist) {
		return properties{}, false, nil
	}
	if err != nil {
		return properties{}, false, fmt.Errorf("metadata: %w", err)
	}
	p, err := parseProperties(data)
	if err != nil {
		return properties{}, false, err
	}
	return p, true, nil
}

// parseProperties reads meta.properties' key=value lines; blank lines,
// comments and keys other than node.id and cluster.id are skipped. A
// missing node.id is -1 (no node: it matches none configured).
func parseProperties(data []byte) (properties, error) {
	p := properties{NodeID: -1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "node.id":
			// A node id is an int32: a larger number must not wrap
			// round to another node's.
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return properties{}, fmt.Errorf("metadata: %s: bad node.id %q", propertiesFile, v)
			}
			p.NodeID = int32(id)
		case "cluster.id":
			p.ClusterID = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return properties{}, fmt.Errorf("metadata: read %s: %w", propertiesFile, err)
	}
	return p, nil
}

// formatProperties is meta.properties' content for p.
func formatProperties(p properties) []byte {
	body := fmt.Sprintf("# written by quire; do not edit\nversion=1\nnode.id=%d\n", p.NodeID)
	if p.ClusterID != "" {
		body += "cluster.id=" + p.ClusterID + "\n"
	}
	return []byte(body)
}

// writeProperties replaces meta.properties atomically.
func writeProperties(dir string, p properties) error {
	path := filepath.Join(dir, propertiesFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, formatProperties(p), 0o644); err != nil {
		return fmt.Errorf("metadata: write %s: %w", propertiesFile, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("metadata: write %s: %w", propertiesFile, err)
	}
	return nil
}

// checkProperties refuses a dir written by another node or cluster.
func checkProperties(dir string, nodeID int32, clusterID string) (properties, error) {
	p, ok, err := readProperties(dir)
	if err != nil || !ok {
		return p, err
	}
	if p.NodeID != nodeID {
		return p, fmt.Errorf("metadata: dir %s belongs to node %d, configured node %d", dir, p.NodeID, nodeID)
	}
	if p.ClusterID != "" && clusterID != "" && p.ClusterID != clusterID {
		return p, fmt.Errorf("%w: dir %s belongs to cluster %q, configured %q", ErrClusterIDMismatch, dir, p.ClusterID, clusterID)
	}
	return p, nil
}
