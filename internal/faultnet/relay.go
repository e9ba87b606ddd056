package faultnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// SilentRelay accepts TCP connections and never forwards them: dials to it
// succeed, bytes written to it vanish, and nothing ever comes back. It holds
// each connection open until Close or until the dialer closes it.
type SilentRelay struct {
	ln   net.Listener
	wg   sync.WaitGroup
	stop context.CancelFunc

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
	closed   bool
}

// NewSilentRelay listens on addr (use "127.0.0.1:0") until ctx ends or Close.
func NewSilentRelay(ctx context.Context, addr string) (*SilentRelay, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultnet: silent relay listen %s: %w", addr, err)
	}
	ctx, stop := context.WithCancel(ctx)
	r := &SilentRelay{ln: ln, stop: stop, conns: make(map[net.Conn]struct{})}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		<-ctx.Done()
		r.shutdown()
	}()
	go func() {
		defer r.wg.Done()
		r.acceptLoop()
	}()
	return r, nil
}

// Addr is the address to dial.
func (r *SilentRelay) Addr() string { return r.ln.Addr().String() }

// Accepted reports how many connections the relay has swallowed.
func (r *SilentRelay) Accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// Close stops the relay, closes every held connection, and waits for its
// goroutines.
func (r *SilentRelay) Close() error {
	r.stop()
	r.wg.Wait()
	return nil
}

func (r *SilentRelay) shutdown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	_ = r.ln.Close()
	for c := range r.conns {
		_ = c.Close()
	}
}

func (r *SilentRelay) acceptLoop() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			return
		}
		r.accepted++
		r.conns[c] = struct{}{}
		r.wg.Add(1)
		r.mu.Unlock()
		go func() {
			defer r.wg.Done()
			// Drain and discard, so the dialer's writes never block: the
			// handshake appears sent and is never answered.
			_, _ = io.Copy(io.Discard, c)
			r.mu.Lock()
			delete(r.conns, c)
			r.mu.Unlock()
			_ = c.Close()
		}()
	}
}
