package actor_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeQuotesTheExample keeps the README's quick tour in step with
// example_test.go, which go test runs: every line of the tour's code block
// must appear in the example, in the same order.
func TestReadmeQuotesTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), "## Quick tour")
	if !ok {
		t.Fatal("README.md has no \"## Quick tour\" section")
	}
	_, block, ok := strings.Cut(tour, "```go\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("the README's quick tour has no ```go block")
	}
	lines := strings.Split(string(example), "\n")
	at := 0
	for _, want := range strings.Split(block, "\n") {
		if strings.TrimSpace(want) == "" {
			continue
		}
		for at < len(lines) && lines[at] != want {
			at++
		}
		if at == len(lines) {
			t.Fatalf("the README's quick tour line %q is not in example_test.go (in order)", want)
		}
		at++
	}
}
