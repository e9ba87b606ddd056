package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The remote workloads run the receiving actors in other processes: this
// binary, started again with nodeEnv set to a role. Such a node serves
// until its standard input closes (the benchmark closes it, or dies), so
// no node outlives the benchmark even after a kill -9 of it; on Linux the
// kernel also kills a node whose parent exits (Pdeathsig).
const (
	nodeEnv    = "TROUPE_BENCH_NODE"         // role: troupe, protoactor, echo, sink
	seedsEnv   = "TROUPE_BENCH_SEEDS"        // troupe: comma-separated seed addresses
	timesEnv   = "TROUPE_BENCH_TIMINGS"      // troupe: "default" for cluster.DefaultConfig, else the fast timings
	profEnv    = "TROUPE_BENCH_CPUPROFILE"   // -cpuprofile: each node writes <path>.<role>.<pid>
	logEnv     = "TROUPE_BENCH_LOG"          // Troupe members (nodes and this process) log at this level to stderr
	dataEnv    = "TROUPE_BENCH_DATA"         // troupe: the member's DataDir (empty: copies in memory)
	syncEnv    = "TROUPE_BENCH_SYNC"         // troupe: "1" fsyncs before acknowledging (needs a DataDir)
	catchUpEnv = "TROUPE_BENCH_CATCHUP_RATE" // troupe: system.Config.CatchUpRate
)

// nodeMain runs this process as a node when nodeEnv is set; ok reports
// whether it did (then the process should exit with code).
func nodeMain() (code int, ok bool) {
	role := os.Getenv(nodeEnv)
	if role == "" {
		return 0, false
	}
	if err := serveNode(role); err != nil {
		fmt.Fprintf(os.Stderr, "benchmarks node %s: %v\n", role, err)
		return 1, true
	}
	return 0, true
}

// serveNode starts the role's server, prints "ready <addr>" on stdout and
// serves until stdin reaches EOF.
func serveNode(role string) error {
	var addr string
	var stop func() error
	var err error
	// answer, if set, answers the queries the benchmark writes on stdin.
	var answer func(query string) string
	switch role {
	case "troupe":
		var seeds []string
		if s := os.Getenv(seedsEnv); s != "" {
			seeds = strings.Split(s, ",")
		}
		addr, stop, answer, err = startTroupeNode(seeds, os.Getenv(timesEnv))
	case "protoactor":
		addr, stop, err = startProtoNode()
	case "echo":
		addr, stop, err = startEcho()
	case "sink":
		addr, stop, err = startSink()
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	var prof *os.File
	if path := os.Getenv(profEnv); path != "" {
		if prof, err = startProfile(fmt.Sprintf("%s.%s.%d", path, role, os.Getpid())); err != nil {
			return err
		}
	}
	fmt.Printf("ready %s\n", addr)
	// Until the benchmark closes stdin or exits, each line is a query,
	// answered on stdout as the query, a space and the answer. The query
	// "profile NAME" (when profiling) ends the profile so far and starts
	// <path>.<role>.<pid>.NAME, so that a phase of a workload has its own.
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		q := sc.Text()
		if name, ok := strings.CutPrefix(q, "profile "); ok {
			a := "off"
			if prof != nil {
				pprof.StopCPUProfile()
				prof.Close()
				path := fmt.Sprintf("%s.%s.%d.%s", os.Getenv(profEnv), role, os.Getpid(), name)
				// The allocations so far, cumulative: a phase's own are
				// its file with the one before as -base.
				if err := writeAllocs(path + ".allocs"); err != nil {
					return err
				}
				if prof, err = startProfile(path); err != nil {
					return err
				}
				a = "on"
			}
			fmt.Printf("%s %s\n", q, a)
			continue
		}
		if answer != nil {
			fmt.Printf("%s %s\n", q, answer(q))
		}
	}
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
		if err := writeAllocs(fmt.Sprintf("%s.%s.%d.allocs", os.Getenv(profEnv), role, os.Getpid())); err != nil {
			return err
		}
	}
	return stop()
}

// writeAllocs writes the allocations profile (cumulative since start)
// to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startProfile starts a CPU profile into a new file at path.
func startProfile(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// node is a child process serving one role.
type node struct {
	role  string
	addr  string
	env   []string // the extra environment it started with
	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	// lines are the node's stdout lines after "ready": answers to query.
	lines   chan string
	queryMu sync.Mutex
}

// children are the nodes still running, for killAll.
var children = struct {
	sync.Mutex
	m map[*node]bool
}{m: map[*node]bool{}}

// startNode starts this binary as a node of role with the extra
// environment env and waits until it is ready (at most 30 s).
func startNode(role string, env ...string) (*node, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), nodeEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &node{role: role, env: env, cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	children.Lock()
	children.m[n] = true
	children.Unlock()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- a
				break
			}
		}
		close(ready)
		for sc.Scan() {
			select {
			case n.lines <- sc.Text():
			default: // nobody asked: dropped
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a, ok := <-ready:
		if !ok {
			n.kill()
			return nil, fmt.Errorf("%s node exited before it was ready", role)
		}
		n.addr = a
		return n, nil
	case <-time.After(30 * time.Second):
		n.kill()
		return nil, fmt.Errorf("%s node not ready after 30 s", role)
	}
}

// query writes q on the node's stdin and returns its answer (at most
// 5 s later).
func (n *node) query(q string) (string, error) {
	n.queryMu.Lock()
	defer n.queryMu.Unlock()
	if _, err := io.WriteString(n.stdin, q+"\n"); err != nil {
		return "", fmt.Errorf("%s node: query %q: %w", n.role, q, err)
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case l := <-n.lines:
			if a, ok := strings.CutPrefix(l, q+" "); ok {
				return a, nil
			}
		case <-t.C:
			return "", fmt.Errorf("%s node: no answer to %q after 5 s", n.role, q)
		}
	}
}

// stop closes the node's stdin, lets it leave for up to grace and then
// kills it.
func (n *node) stop(grace time.Duration) {
	n.once.Do(func() {
		n.stdin.Close()
		done := make(chan struct{})
		go func() { n.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			n.cmd.Process.Kill()
			<-done
		}
		children.Lock()
		delete(children.m, n)
		children.Unlock()
	})
}

// kill is kill -9 and waits for the process to be gone.
func (n *node) kill() {
	n.once.Do(func() {
		n.cmd.Process.Kill()
		n.stdin.Close()
		n.cmd.Wait()
		children.Lock()
		delete(children.m, n)
		children.Unlock()
	})
}

// killAll kills every node still running (on an interrupt).
func killAll() {
	children.Lock()
	ns := make([]*node, 0, len(children.m))
	for n := range children.m {
		ns = append(ns, n)
	}
	children.Unlock()
	for _, n := range ns {
		n.kill()
	}
}

// remoteEnv holds the nodes and local systems of the remote workloads,
// made on first use and kept for the whole run (so connections stay warm
// from the warm-up on); close stops all.
type remoteEnv struct {
	mu      sync.Mutex
	troupe  *troupeRemote
	proto   *protoRemote
	echo    *node
	closers []func()
}

func (e *remoteEnv) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
	e.troupe, e.proto, e.echo = nil, nil, nil
}

func (e *remoteEnv) onClose(f func()) { e.closers = append(e.closers, f) }

var errNoEnv = errors.New("remote workloads need a remote environment")

// closeCtx bounds a system's close.
func closeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// baselineName keys the bare TCP round trips among remote-ask's results.
const baselineName = "tcp"

// tcpBaseline measures n bare TCP round trips to the echo node.
func (e *remoteEnv) tcpBaseline(n int) (measurement, error) {
	e.mu.Lock()
	if e.echo == nil {
		nd, err := startNode("echo")
		if err != nil {
			e.mu.Unlock()
			return measurement{}, err
		}
		e.echo = nd
		e.onClose(func() { nd.stop(time.Second) })
	}
	addr, pid := e.echo.addr, e.echo.cmd.Process.Pid
	e.mu.Unlock()
	clk := &clock{nodePids: []int{pid}}
	lat, err := tcpRoundTrips(clk, addr, n)
	if err != nil {
		return measurement{}, err
	}
	return latencies(clk, lat), nil
}

// killNodesOnSignal kills the nodes and exits on an interrupt or SIGTERM
// until the returned stop is called.
func killNodesOnSignal(stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			killAll()
			fmt.Fprintf(stderr, "benchmarks: %v: nodes killed\n", s)
			os.Exit(130)
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}
