package storage

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// MetaPropertiesFile names the data directory's identity file, in Kafka's
// format (java properties):
//
//	version=1
//	directory.id=<22 base64url characters: 16 random bytes>
//
// It is written once, atomically, when the directory is first opened
// without one (a new or wiped directory, or one from before the file
// existed) and never changed afterwards. The broker registers with the
// directory id, so the controller can tell a restart from a node whose
// data is gone.
const MetaPropertiesFile = "meta.properties"

const (
	metaPropertiesVersion = "1"
	keyMetaVersion        = "version"
	keyDirectoryID        = "directory.id"
)

// ErrBadMetaProperties reports an unreadable meta.properties: the broker
// refuses to start rather than guess whose directory it is.
var ErrBadMetaProperties = errors.New("storage: bad " + MetaPropertiesFile)

// loadOrCreateDirectoryID returns the directory id from dir's
// meta.properties, first writing a new one when the file does not exist.
func loadOrCreateDirectoryID(fsys FS, dir string) (id string, created bool, err error) {
	path := join(dir, MetaPropertiesFile)
	data, err := readWholeFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		props := map[string]string{keyMetaVersion: metaPropertiesVersion}
		if props[keyDirectoryID], err = newDirectoryID(); err != nil {
			return "", false, err
		}
		if err := writeFileAtomic(fsys, path, formatProperties(props)); err != nil {
			return "", false, fmt.Errorf("storage: write %s: %w", path, err)
		}
		return props[keyDirectoryID], true, nil
	case err != nil:
		return "", false, fmt.Errorf("storage: read %s: %w", path, err)
	}
	props, err := parseProperties(data)
	if err != nil {
		return "", false, fmt.Errorf("%w: %s: %v", ErrBadMetaProperties, path, err)
	}
	if v := props[keyMetaVersion]; v != metaPropertiesVersion {
		return "", false, fmt.Errorf("%w: %s: version %q, want %s", ErrBadMetaProperties, path, v, metaPropertiesVersion)
	}
	id = props[keyDirectoryID]
	if b, derr := base64.RawURLEncoding.DecodeString(id); derr != nil || len(b) != 16 {
		return "", false, fmt.Errorf("%w: %s: directory.id %q is not a 16-byte base64url id", ErrBadMetaProperties, path, id)
	}
	return id, false, nil
}

// newDirectoryID returns a random id in Kafka's Uuid form (16 bytes,
// unpadded base64url).
func newDirectoryID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("storage: directory id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// parseProperties reads key=value lines; blank lines and lines starting
// with # or ! are comments. (Java's escapes and continuations are not
// needed for the values written here.)
func parseProperties(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: no '='", n+1)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func formatProperties(props map[string]string) []byte {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("#\n# Written by quire when the data directory was created. Do not edit.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return []byte(b.String())
}
