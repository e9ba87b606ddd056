package faultnet

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// ListenPipe returns an in-process listener named name: no socket, no port,
// fully deterministic delivery. The Network's Dialers reach it by that name
// (any network argument), with the same plans and partitions as TCP; its
// connections are buffered Pipes. Dials wait until Accept takes them.
func (n *Network) ListenPipe(name string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, taken := n.pipes[name]; taken {
		return nil, fmt.Errorf("faultnet: pipe listener %q: %w", name, ErrAddrInUse)
	}
	pl := &pipeListener{n: n, name: name, queue: make(chan net.Conn), closed: make(chan struct{})}
	n.pipes[name] = pl
	return pl, nil
}

type pipeListener struct {
	n     *Network
	name  string
	queue chan net.Conn

	once   sync.Once
	closed chan struct{}
}

func (l *pipeListener) dial(ctx context.Context, from string) (net.Conn, error) {
	near, far := newPipe(from, l.name)
	l.n.mu.Lock()
	client := l.n.wrapLocked(near, from, l.name, false)
	server := l.n.wrapLocked(far, from, l.name, true)
	l.n.mu.Unlock()
	select {
	case l.queue <- server:
		return client, nil
	case <-l.closed:
		err := &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(l.name), Err: ErrRefused}
		_ = client.Close()
		_ = server.Close()
		return nil, err
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(l.name), Err: ctx.Err()}
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.queue:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "pipe", Addr: pipeAddr(l.name), Err: net.ErrClosed}
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.n.mu.Lock()
		delete(l.n.pipes, l.name)
		l.n.mu.Unlock()
	})
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.name) }
