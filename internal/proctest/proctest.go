package proctest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// envRole names the role of a child process; the parent does not set it.
const envRole = "TROUPE_PROCTEST_ROLE"

// StopGrace bounds how long Stop waits for a child to exit after its
// stdin closed before it kills it.
const StopGrace = 10 * time.Second

// Roles maps a role's name to its body, which returns the child's exit
// code.
type Roles map[string]func() int

// RunIfChild returns if this process is not a child started by Start;
// otherwise it runs the child's role and exits with its code (2 for a
// role it does not know).
func (r Roles) RunIfChild() {
	role, ok := os.LookupEnv(envRole)
	if !ok {
		return
	}
	body, ok := r[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "proctest: unknown role %q\n", role)
		os.Exit(2)
	}
	os.Exit(body())
}

// Spec says what child to start.
type Spec struct {
	Role string   // one of the Roles the test binary's TestMain runs
	Env  []string // "NAME=value" pairs added to the parent's environment
	// OnLine, if set, sees every line the child writes to stdout, in
	// order, on a goroutine of Proc's.
	OnLine func(line string)
	// Args are added to the child's command line, after those that keep
	// the test framework from running tests.
	Args []string
	// Prefix, if set, is a command that runs the child: the child's
	// command line is appended to it (say ip netns exec NS, to run the
	// child inside a network namespace). The command must exec the child
	// in its own process, as ip netns exec does, so that Kill and Signal
	// reach the child itself.
	Prefix []string
	// Exe, if set, is the test binary the child runs instead of this
	// one (the same package's, built otherwise: without the race
	// detector, say).
	Exe string
}

// Proc is a child process as its parent sees it.
type Proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr LockedBuffer
	done   chan struct{} // closed once stdout is drained and the process reaped
	err    error         // Wait's error, set before done closes

	mu    sync.Mutex
	lines []string
	seen  chan struct{} // closed and replaced at each new line
}

// Start starts a child in spec.Role. The child is stopped (Stop) when the
// test ends, if it still runs.
func Start(t testing.TB, spec Spec) *Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("start a %s process: %v", spec.Role, err)
	}
	if spec.Exe != "" {
		exe = spec.Exe
	}
	args := append([]string{exe, "-test.run=^$", "-test.count=1"}, spec.Args...)
	if len(spec.Prefix) > 0 {
		args = append(slices.Clone(spec.Prefix), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), envRole+"="+spec.Role), spec.Env...)
	p := &Proc{cmd: cmd, done: make(chan struct{}), seen: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a %s process: %v", spec.Role, err)
	}
	go p.read(stdout, spec.OnLine)
	t.Cleanup(func() { p.Stop() })
	return p
}

func (p *Proc) read(stdout io.Reader, onLine func(string)) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if onLine != nil {
			onLine(line)
		}
		p.mu.Lock()
		p.lines = append(p.lines, line)
		close(p.seen)
		p.seen = make(chan struct{})
		p.mu.Unlock()
	}
	p.err = p.cmd.Wait()
	close(p.done)
}

// PID returns the child's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// WaitLine waits for the first line the child wrote that starts with
// prefix and returns its fields after the prefix. It fails the test if
// the child exits first or limit passes.
func (p *Proc) WaitLine(t testing.TB, prefix string, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		p.mu.Lock()
		seen := p.seen
		p.mu.Unlock()
		if f, ok := p.line(prefix); ok {
			return f
		}
		select {
		case <-seen:
		case <-p.done:
			// The last lines may have arrived with the exit.
			if f, ok := p.line(prefix); ok {
				return f
			}
			t.Fatalf("the %s process exited (%v) before writing %q; stderr:\n%s", p.role(), p.err, prefix, p.Stderr())
		case <-deadline:
			t.Fatalf("the %s process wrote no %q within %v; stderr:\n%s", p.role(), prefix, limit, p.Stderr())
		}
	}
}

func (p *Proc) line(prefix string) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.Fields(rest), true
		}
	}
	return nil, false
}

func (p *Proc) role() string {
	for _, e := range p.cmd.Env {
		if r, ok := strings.CutPrefix(e, envRole+"="); ok {
			return r
		}
	}
	return "child"
}

// Kill kills the child with SIGKILL (no goodbye of any kind) and waits
// until it is reaped.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	p.stdin.Close()
	<-p.done
}

// Signal sends sig to the child: SIGSTOP and SIGCONT pause and resume
// it, as a stalled machine would.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop closes the child's stdin, which asks it to stop in order, and
// waits until it exits; after StopGrace it kills it. It returns the
// child's exit error (nil for a clean exit; a killed child's error says
// so).
func (p *Proc) Stop() error {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(StopGrace):
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

// Exited is closed once the child has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Stderr returns what the child wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// FreeLoopback returns n loopback addresses whose ports were free when it
// looked, for children that must listen at an address the parent knows
// before they start (to restart one at the same address).
func FreeLoopback(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// LockedBuffer is a sink that several goroutines may write (a child's
// stderr, a logger's output) while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
