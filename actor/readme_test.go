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

// TestReadmeRunsExistingExamples keeps the README's set-up commands
// runnable: the first is the clustered example, and every example it
// names is a program in examples/.
func TestReadmeRunsExistingExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skipf("no README: %v", err)
	}
	_, setup, ok := strings.Cut(string(readme), "## Set up and run")
	if ok {
		_, setup, ok = strings.Cut(setup, "```sh\n")
	}
	if ok {
		setup, _, ok = strings.Cut(setup, "```")
	}
	if !ok {
		t.Fatal("README.md has no ```sh block under \"## Set up and run\"")
	}
	cmds := strings.Split(strings.TrimSpace(setup), "\n")
	if first := strings.Fields(cmds[0]); len(first) < 3 || strings.Join(first[:3], " ") != "go run ./examples/localcluster" {
		t.Errorf("the first set-up command is %q, want go run ./examples/localcluster", cmds[0])
	}
	for _, dir := range strings.Fields(string(readme)) {
		dir = strings.Trim(dir, "`(),.")
		if !strings.HasPrefix(dir, "examples/") && !strings.HasPrefix(dir, "./examples/") {
			continue
		}
		if _, err := os.Stat("../" + strings.TrimPrefix(dir, "./") + "/main.go"); err != nil {
			t.Errorf("the README names %s, which is not an example program: %v", dir, err)
		}
	}
}
