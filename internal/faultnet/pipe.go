package faultnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// PipeBuffer is how many bytes each direction of a Pipe holds before writes
// block, about a small kernel socket buffer.
const PipeBuffer = 64 << 10

// Pipe returns the two ends of an in-process connection, wrapped with the
// given faults (aFaults for the first end, bFaults for the second). Unlike
// net.Pipe it is buffered (PipeBuffer bytes each way), so a writer does not
// wait for the reader, as with TCP. Reset on an end makes the peer's reads
// and writes fail with ECONNRESET at once, discarding buffered bytes.
func Pipe(aFaults, bFaults []Fault) (*Conn, *Conn) {
	a, b := newPipe("pipe-a", "pipe-b")
	return Wrap(a, aFaults...), Wrap(b, bFaults...)
}

// newPipe returns the raw ends of a buffered pipe named for its endpoints.
func newPipe(aName, bName string) (*pipeEnd, *pipeEnd) {
	p := &pipe{changed: make(chan struct{})}
	a := &pipeEnd{p: p, in: &p.ab[1], out: &p.ab[0], local: pipeAddr(aName), remote: pipeAddr(bName)}
	b := &pipeEnd{p: p, in: &p.ab[0], out: &p.ab[1], local: pipeAddr(bName), remote: pipeAddr(aName)}
	return a, b
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// pipe holds both directions under one lock; ab[0] carries a→b, ab[1] b→a.
type pipe struct {
	mu      sync.Mutex
	changed chan struct{}
	ab      [2]pipeDir
}

type pipeDir struct {
	buf        []byte
	eof        bool // writer closed: reader sees EOF after the buffer drains
	readerGone bool // reader closed: writes fail
	reset      bool // aborted: both sides fail with ECONNRESET
}

type pipeEnd struct {
	p      *pipe
	in     *pipeDir
	out    *pipeDir
	local  pipeAddr
	remote pipeAddr
	closed bool
	abort  bool // SetLinger(0) was called: Close resets
	rdl    time.Time
	wdl    time.Time
}

func (e *pipeEnd) signalLocked() {
	close(e.p.changed)
	e.p.changed = make(chan struct{})
}

// waitLocked waits for a change or the deadline; false means the deadline passed.
func (e *pipeEnd) waitLocked(dl time.Time) bool {
	var timeout <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	ch := e.p.changed
	e.p.mu.Unlock()
	defer e.p.mu.Lock()
	select {
	case <-ch:
		return true
	case <-timeout:
		return false
	}
}

func (e *pipeEnd) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "pipe", Source: e.local, Addr: e.remote, Err: err}
}

func (e *pipeEnd) Read(b []byte) (int, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	for {
		switch {
		case e.closed:
			return 0, e.opErr("read", net.ErrClosed)
		case e.in.reset:
			return 0, e.opErr("read", syscall.ECONNRESET)
		case len(e.in.buf) > 0:
			n := copy(b, e.in.buf)
			e.in.buf = e.in.buf[n:]
			e.signalLocked()
			return n, nil
		case e.in.eof:
			return 0, io.EOF
		case len(b) == 0:
			return 0, nil
		}
		if !e.waitLocked(e.rdl) {
			return 0, e.opErr("read", os.ErrDeadlineExceeded)
		}
	}
}

func (e *pipeEnd) Write(b []byte) (int, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	total := 0
	for {
		switch {
		case e.closed:
			return total, e.opErr("write", net.ErrClosed)
		case e.out.reset:
			return total, e.opErr("write", syscall.ECONNRESET)
		case e.out.readerGone:
			return total, e.opErr("write", syscall.EPIPE)
		case len(b) == 0:
			return total, nil
		}
		if room := PipeBuffer - len(e.out.buf); room > 0 {
			n := min(room, len(b))
			e.out.buf = append(e.out.buf, b[:n]...)
			b = b[n:]
			total += n
			e.signalLocked()
			continue
		}
		if !e.waitLocked(e.wdl) {
			return total, e.opErr("write", os.ErrDeadlineExceeded)
		}
	}
}

func (e *pipeEnd) Close() error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if e.closed {
		return e.opErr("close", net.ErrClosed)
	}
	e.closed = true
	e.out.eof = true
	e.in.readerGone = true
	if e.abort {
		e.out.reset, e.in.reset = true, true
		e.out.buf, e.in.buf = nil, nil
	}
	e.signalLocked()
	return nil
}

// SetLinger(0) makes Close abortive, as for TCP.
func (e *pipeEnd) SetLinger(sec int) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.abort = sec == 0
	return nil
}

func (e *pipeEnd) LocalAddr() net.Addr  { return e.local }
func (e *pipeEnd) RemoteAddr() net.Addr { return e.remote }

func (e *pipeEnd) SetDeadline(t time.Time) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.rdl, e.wdl = t, t
	e.signalLocked()
	return nil
}

func (e *pipeEnd) SetReadDeadline(t time.Time) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.rdl = t
	e.signalLocked()
	return nil
}

func (e *pipeEnd) SetWriteDeadline(t time.Time) error {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	e.wdl = t
	e.signalLocked()
	return nil
}
