package metadata

import (
	"strings"
	"testing"
)

// The ids NewTopicID makes pass CheckTopicID, each spelling of an id is
// its only one, and the zero id (Kafka's "no id") is refused.
func TestCheckTopicID(t *testing.T) {
	for range 100 {
		id, err := NewTopicID()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckTopicID(id); err != nil {
			t.Fatalf("NewTopicID made %q: %v", id, err)
		}
	}
	for id, why := range map[string]string{
		"":                         "0 characters",
		"AAECAwQFBgcICQoLDA0ODx":   "base64url",
		"AAECAwQFBgcICQoLDA0ODw==": "base64url",
		"AAECAwQFBgcICQoLDA0OD+":   "base64url",
		"AAAAAAAAAAAAAAAAAAAAAA":   "zero id",
		"AAECAwQFBgcICQoLDA0ODxAR": "24 characters",
	} {
		err := CheckTopicID(id)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckTopicID(%q) = %v, want an error saying %q", id, err, why)
		}
	}
}
