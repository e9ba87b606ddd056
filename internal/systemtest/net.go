package systemtest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/system"
)

// Net is the network of one in-process member: its listener and its
// dialer, which a test can cut (every connection closed, new ones
// refused) and heal. The zero value is a healed network; Attach it to a
// member's config before the member starts.
type Net struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// Attach makes cfg's member listen on a fresh loopback port and dial
// through n, so that Cut breaks its connections.
func (n *Net) Attach(t testing.TB, cfg *system.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = cutListener{ln, n}
	cfg.Dialer = n
}

// Cut closes every connection of the member and refuses new ones until
// Heal: its peers see what a killed process leaves, closed connections
// and then silence.
func (n *Net) Cut() { n.setCut(true) }

// Heal lets the member connect again.
func (n *Net) Heal() { n.setCut(false) }

func (n *Net) setCut(cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = cut
	if cut {
		for c := range n.conns {
			c.Close()
		}
		clear(n.conns)
	}
}

func (n *Net) track(c net.Conn) net.Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut {
		c.Close()
		return c
	}
	if n.conns == nil {
		n.conns = map[net.Conn]struct{}{}
	}
	n.conns[c] = struct{}{}
	return c
}

// DialContext is the member's wire.Dialer.
func (n *Net) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	cut := n.cut
	n.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("dial %s: network cut", addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return n.track(c), nil
}

type cutListener struct {
	net.Listener
	n *Net
}

func (l cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.n.track(c), nil
}

// Crash stops s, whose network is n, as a killed process would stop: its
// connections are cut first, so that nothing it says while closing (no
// leave, no hand-off, no goodbye) reaches its peers, and it closes
// without waiting for anything. Peers find out by the closed connections
// and the silence that follows.
func Crash(s *system.System, n *Net) {
	n.Cut()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ctx) // a crash reports nothing: errors are what it abandoned
}
