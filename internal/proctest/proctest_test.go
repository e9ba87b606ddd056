package proctest_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/proctest"
	"go.uber.org/goleak"
)

const limit = 10 * time.Second

func TestMain(m *testing.M) {
	proctest.Roles{
		"greeter": func() int {
			fmt.Println("hello", os.Getenv("NAME"))
			fmt.Println("pid", os.Getpid())
			io.Copy(io.Discard, os.Stdin) // until the parent stops it
			fmt.Fprintln(os.Stderr, "bye")
			return 0
		},
		"failer": func() int {
			fmt.Fprintln(os.Stderr, "failing on purpose")
			return 3
		},
	}.RunIfChild()
	goleak.VerifyTestMain(m)
}

func TestAChildRunsItsRoleAndStopsWhenItsStdinCloses(t *testing.T) {
	var lines []string
	p := proctest.Start(t, proctest.Spec{Role: "greeter", Env: []string{"NAME=ada"}, OnLine: func(l string) { lines = append(lines, l) }})
	if got := p.WaitLine(t, "hello", limit); len(got) != 1 || got[0] != "ada" {
		t.Fatalf("WaitLine(hello) = %q, want [ada]", got)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v, want a clean exit; stderr: %s", err, p.Stderr())
	}
	if !strings.Contains(p.Stderr(), "bye") {
		t.Fatalf("stderr %q, want the child's goodbye", p.Stderr())
	}
	if len(lines) != 2 || lines[0] != "hello ada" || !strings.HasPrefix(lines[1], "pid ") {
		t.Fatalf("OnLine saw %q, want the two lines in order", lines)
	}
}

func TestAPrefixRunsTheChildInItsOwnProcess(t *testing.T) {
	// env execs the child with NAME set: the child is the process Start
	// made, so PID (and so Kill and Signal) reach the child itself.
	p := proctest.Start(t, proctest.Spec{Role: "greeter", Prefix: []string{"env", "NAME=grace"}})
	if got := p.WaitLine(t, "hello", limit); len(got) != 1 || got[0] != "grace" {
		t.Fatalf("WaitLine(hello) = %q, want [grace] (set by the prefix)", got)
	}
	if got := p.WaitLine(t, "pid", limit); len(got) != 1 || got[0] != strconv.Itoa(p.PID()) {
		t.Fatalf("the child runs as pid %q, Start made %d", got, p.PID())
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v, want a clean exit; stderr: %s", err, p.Stderr())
	}
}

func TestKillEndsAChildWithSIGKILL(t *testing.T) {
	p := proctest.Start(t, proctest.Spec{Role: "greeter"})
	p.WaitLine(t, "hello", limit)
	p.Kill()
	var ee *exec.ExitError
	err := p.Stop()
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("after Kill: err = %v, want death by SIGKILL", err)
	}
	if strings.Contains(p.Stderr(), "bye") {
		t.Fatal("a killed child said goodbye")
	}
}

func TestAChildsExitCodeAndStderrReachTheParent(t *testing.T) {
	p := proctest.Start(t, proctest.Spec{Role: "failer"})
	<-p.Exited()
	var ee *exec.ExitError
	if err := p.Stop(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit code 3", err)
	}
	if !strings.Contains(p.Stderr(), "failing on purpose") {
		t.Fatalf("stderr %q, want the child's message", p.Stderr())
	}
}

func TestFreeLoopbackGivesDistinctAddresses(t *testing.T) {
	addrs := proctest.FreeLoopback(t, 3)
	seen := map[string]bool{}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Fatalf("FreeLoopback(3) = %v, want three distinct loopback addresses", addrs)
		}
		seen[a] = true
	}
}

func TestAPausedChildResumesWhereItWas(t *testing.T) {
	p := proctest.Start(t, proctest.Spec{Role: "greeter", Env: []string{"NAME=bob"}})
	p.WaitLine(t, "hello", limit)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop after a pause: %v, want a clean exit", err)
	}
}
