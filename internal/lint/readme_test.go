package lint

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExamplesRunByE2E keeps the README's grpcurl examples honest:
// every method they call and every one-line request body they send is also
// in scripts/e2e.sh, which `make test` runs.
func TestReadmeExamplesRunByE2E(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	e2e, err := os.ReadFile("../../scripts/e2e.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(e2e)
	methods := regexp.MustCompile(`(?:quire\.v1|grpc\.health\.v1)\.[A-Za-z]+/[A-Za-z]+`).FindAllString(string(readme), -1)
	if len(methods) < 5 {
		t.Fatalf("found only %d grpcurl methods in README.md", len(methods))
	}
	for _, m := range methods {
		if !strings.Contains(script, m) {
			t.Errorf("README calls %s but scripts/e2e.sh does not", m)
		}
	}
	for _, body := range regexp.MustCompile(`-d '([^'\n]+)'`).FindAllStringSubmatch(string(readme), -1) {
		if !strings.Contains(script, "'"+body[1]+"'") {
			t.Errorf("README sends %s but scripts/e2e.sh does not", body[1])
		}
	}
}
