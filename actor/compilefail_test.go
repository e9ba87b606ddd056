package actor_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTool finds the go command, or skips the test.
func goTool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds programs with the go command; skipped in -short mode")
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Skip("the go command is not available; cannot run compile tests")
	return ""
}

// goBuild builds the package in dir (relative to the actor package) from
// the module root and returns the compiler's output.
func goBuild(t *testing.T, gocmd, dir string) (string, error) {
	t.Helper()
	cmd := exec.Command(gocmd, "build", "-o", os.DevNull, "./actor/"+filepath.ToSlash(dir))
	cmd.Dir = ".." // the module root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// wanted reads the "// want: <regexp>" marker of a compilefail case: the
// line that must fail and what the compiler must say about it.
func wanted(t *testing.T, file string) (line int, re *regexp.Regexp) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, want, ok := strings.Cut(sc.Text(), "// want: "); ok {
			return n, regexp.MustCompile(want)
		}
	}
	t.Fatalf("%s has no // want: marker", file)
	return 0, nil
}

func TestCompileControlBuilds(t *testing.T) {
	gocmd := goTool(t)
	t.Parallel()
	if out, err := goBuild(t, gocmd, "testdata/compileok"); err != nil {
		t.Fatalf("the control program must build, so that compilefail failures mean what they say: %v\n%s", err, out)
	}
}

// TestTypeErrorsDoNotCompile proves the typed API rejects misuse at
// compile time: each program under testdata/compilefail must fail to
// build, at the marked line, with the marked message.
func TestTypeErrorsDoNotCompile(t *testing.T) {
	gocmd := goTool(t)
	cases, err := os.ReadDir("testdata/compilefail")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"tell_unaccepted_message":  true, // Tell with a message the actor does not accept
		"ask_other_actors_request": true, // Ask with another actor type's request
		"respond_wrong_reply_type": true, // Respond with the wrong reply type
		"ask_result_wrong_type":    true, // Ask's result assigned to the wrong type
	}
	for _, c := range cases {
		delete(want, c.Name())
	}
	if len(want) > 0 {
		t.Fatalf("compilefail cases missing: %v", want)
	}
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("testdata", "compilefail", c.Name())
			line, re := wanted(t, filepath.Join(dir, "main.go"))
			out, err := goBuild(t, gocmd, dir)
			if err == nil {
				t.Fatalf("%s compiled; it must be rejected with %q", dir, re)
			}
			at := fmt.Sprintf("main.go:%d:", line)
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, at) && re.MatchString(l) {
					return
				}
			}
			t.Fatalf("build failed, but not at %s with %q:\n%s", at, re, out)
		})
	}
}
