package system

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// acceptor owns a member's listener for the member's lifetime and hands
// the connections it accepts to the transport of the current incarnation.
// A transport closes the listener it serves when it closes; a member that
// rejoins gets a new transport, which must accept on the same address.
// Listening again would race others for the port and is impossible with
// a Config.Listener the caller supplied; instead each transport serves a
// handoff that Close ends without closing the real listener.
type acceptor struct {
	ln     net.Listener
	cur    atomic.Pointer[handoff]
	closed atomic.Bool
	done   chan struct{} // closed when the accept loop ends
	once   sync.Once
}

func newAcceptor(ln net.Listener) *acceptor {
	a := &acceptor{ln: ln, done: make(chan struct{})}
	h := &handoff{a: a, ch: make(chan net.Conn), closed: make(chan struct{})}
	h.Close() // no transport yet
	a.cur.Store(h)
	go a.run()
	return a
}

// listener returns a new handoff, which receives the connections from now
// on, for a transport to Serve.
func (a *acceptor) listener() net.Listener {
	h := &handoff{a: a, ch: make(chan net.Conn), closed: make(chan struct{})}
	if a.closed.Load() {
		h.Close()
	}
	a.cur.Swap(h).Close()
	return h
}

func (a *acceptor) run() {
	defer close(a.done)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if a.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		h := a.cur.Load()
		select {
		case h.ch <- c:
		case <-h.closed:
			// Between transports (a rejoin) or closing: the peer dials
			// again.
			c.Close()
		}
	}
}

// Close closes the listener and waits for the accept loop to end.
func (a *acceptor) Close() {
	a.once.Do(func() {
		a.closed.Store(true)
		a.ln.Close()
		a.cur.Load().Close()
		<-a.done
	})
}

// handoff is the listener one transport serves.
type handoff struct {
	a      *acceptor
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.closed:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.closed) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.a.ln.Addr() }
