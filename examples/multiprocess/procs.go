package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one node process. It runs until its stdin closes: the node
// then leaves the cluster and exits. Its stdin is a pipe from this
// process, so a node also exits if this process dies, even by SIGKILL.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the node's output, line by line
	stderr lockedBuffer
	done   chan struct{} // closed once the process has exited and been reaped
	err    error         // Wait's result, set before done closes
	addr   string
}

func startProc(argv []string) (*proc, error) {
	p := &proc{lines: make(chan string, 16), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout = &lineWriter{lines: p.lines}
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// waitReady waits for the node's address.
func (p *proc) waitReady(ctx context.Context) (string, error) {
	if p.addr == "" {
		line, err := p.waitLine(ctx, "ready ")
		if err != nil {
			return "", err
		}
		p.addr = strings.TrimPrefix(line, "ready ")
	}
	return p.addr, nil
}

// waitLine waits for an output line that starts with prefix.
func (p *proc) waitLine(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return line, nil
			}
		case <-p.done:
			return "", fmt.Errorf("node pid %d exited before printing %q (%v): %s", p.pid(), prefix, p.err, p.stderr.String())
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for node pid %d to print %q: %w", p.pid(), prefix, ctx.Err())
		}
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill node pid %d: %w", p.pid(), err)
	}
	<-p.done
	return nil
}

// stopGrace is how long stopAll lets nodes leave in order before it
// kills them.
const stopGrace = 10 * time.Second

// stopAll closes every node's stdin, so that each leaves the cluster and
// exits, and kills those still running after stopGrace. It returns once
// every process has been reaped, with the errors of nodes that exited
// badly (a node killed on purpose does not count). Nodes that served but
// reported an error while leaving go to warn, if not nil.
func stopAll(procs []*proc, warn func(string)) error {
	for _, p := range procs {
		p.stdin.Close()
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	var errs []error
	late := false
	for _, p := range procs {
		if !late {
			select {
			case <-p.done:
			case <-grace.C:
				late = true
			}
		}
		select {
		case <-p.done:
		default:
			errs = append(errs, fmt.Errorf("node pid %d did not stop within %v: killed", p.pid(), stopGrace))
			p.kill()
			continue
		}
		switch {
		case p.err == nil, killedBySIGKILL(p.cmd):
		case p.cmd.ProcessState.ExitCode() == exitUnclean && warn != nil:
			warn(fmt.Sprintf("node pid %d: %s", p.pid(), p.stderr.String()))
		default:
			errs = append(errs, fmt.Errorf("node pid %d: %w: %s", p.pid(), p.err, p.stderr.String()))
		}
	}
	return errors.Join(errs...)
}

func killedBySIGKILL(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// lineWriter receives a node's stdout and passes on its lines; it drops
// lines nobody reads.
type lineWriter struct {
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		select {
		case w.lines <- string(w.buf[:i]):
		default:
		}
		w.buf = w.buf[i+1:]
	}
}

// lockedBuffer is a bytes.Buffer safe to read while exec writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
