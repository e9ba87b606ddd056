package faultnet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
)

// ConnInfo describes a connection a Network is about to wrap, for a Plan.
type ConnInfo struct {
	// Seq numbers the Network's dialed connections from 0 in dial order,
	// and its accepted connections from 0 in accept order, separately, so
	// that a test dialing from one goroutine gets the same numbering on
	// every run.
	Seq int
	// From is the dialing endpoint's name, To the listening one's.
	From, To string
	// Accepted is true on the listener's side of the connection.
	Accepted bool
}

// Plan chooses the faults of one connection. rng is seeded from the
// Network's seed and ConnInfo.Seq, so a plan that only uses rng and info
// is reproducible. Plans run under the Network's lock, one at a time; they
// must not call the Network.
type Plan func(info ConnInfo, rng *rand.Rand) []Fault

// PartitionMode says what a dial across a partition does.
type PartitionMode uint8

const (
	// Refuse fails the dial at once with ErrPartitioned, like a closed port
	// or a firewall reject.
	Refuse PartitionMode = iota + 1
	// Blackhole holds the dial until its context ends, like dropped SYNs;
	// the error wraps both ErrPartitioned and the context's error.
	Blackhole
	// Swallow lets the dial succeed, but nothing reaches the listener and
	// nothing comes back, like a relay that accepts and never carries:
	// writes succeed until PipeBuffer bytes are queued, reads wait for
	// their deadline. No socket is used.
	Swallow
)

// Network wraps listeners and dialers on real loopback sockets so that every
// connection between them can be faulted, and partitions named endpoints.
// An endpoint's name is the listen address of the node it belongs to. All
// methods are safe for concurrent use.
type Network struct {
	seed uint64

	mu      sync.Mutex
	plan    Plan
	seq     [2]int // next Seq for dialed [0] and accepted [1] connections
	conns   []*tracked
	parts   map[pair]PartitionMode
	dialers map[string]string // local address of a dialed conn → dialer's name
	pipes   map[string]*pipeListener
}

type tracked struct {
	c        *Conn
	from, to string
	remote   string // for accepted conns whose dialer is not yet known
}

type pair struct{ a, b string }

func orderedPair(a, b string) pair {
	if b < a {
		a, b = b, a
	}
	return pair{a, b}
}

// NewNetwork returns a Network whose plans draw from seed.
func NewNetwork(seed uint64) *Network {
	return &Network{seed: seed, parts: make(map[pair]PartitionMode), dialers: make(map[string]string), pipes: make(map[string]*pipeListener)}
}

// SetPlan sets the plan applied to connections made from now on; nil means
// no scheduled faults.
func (n *Network) SetPlan(p Plan) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.plan = p
}

// Conns returns every connection end the Network made, in order.
func (n *Network) Conns() []*Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Conn, len(n.conns))
	for i, t := range n.conns {
		out[i] = t.c
	}
	return out
}

// CutAll cuts every connection the Network made.
func (n *Network) CutAll() {
	for _, c := range n.Conns() {
		c.Cut()
	}
}

// ResetAll resets every connection the Network made.
func (n *Network) ResetAll() {
	for _, c := range n.Conns() {
		c.Reset()
	}
}

// Partition separates endpoints a and b: dials between them behave as mode
// says, and open connections between them stall until Heal: writes succeed
// until the buffers fill (the kernel's, or a Pipe's), reads deliver nothing.
// The bytes are held at the reading end, so both ends must come from this
// Network: a Dialer, and Listen, WrapListener or ListenPipe.
func (n *Network) Partition(a, b string, mode PartitionMode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.parts[orderedPair(a, b)] = mode
	n.applyLocked()
}

// Heal lifts the partition between a and b; stalled connections carry on.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.parts, orderedPair(a, b))
	n.applyLocked()
}

// HealAll lifts every partition.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.parts)
	n.applyLocked()
}

func (n *Network) applyLocked() {
	for _, t := range n.conns {
		_, parted := n.parts[orderedPair(t.from, t.to)]
		t.c.setPartitioned(parted && t.from != "")
	}
}

// wrapLocked applies the plan to a new connection and tracks it.
func (n *Network) wrapLocked(c net.Conn, from, to string, accepted bool) *Conn {
	side := 0
	if accepted {
		side = 1
	}
	info := ConnInfo{Seq: n.seq[side], From: from, To: to, Accepted: accepted}
	n.seq[side]++
	var faults []Fault
	if n.plan != nil {
		stream := uint64(info.Seq)<<1 | uint64(side)
		faults = n.plan(info, rand.New(rand.NewPCG(n.seed, stream*0xbf58476d1ce4e5b9+1)))
	}
	fc := Wrap(c, faults...)
	t := &tracked{c: fc, from: from, to: to}
	n.conns = append(n.conns, t)
	if _, parted := n.parts[orderedPair(from, to)]; parted && from != "" {
		fc.setPartitioned(true)
	}
	return fc
}

// Listen listens on a loopback TCP address and returns a listener whose
// accepted connections are wrapped. Its endpoint name is its address.
func (n *Network) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen %s: %w", addr, err)
	}
	return n.WrapListener(ln), nil
}

// WrapListener wraps an existing listener; its endpoint name is its address.
func (n *Network) WrapListener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, n: n, name: ln.Addr().String()}
}

type listener struct {
	net.Listener
	n    *Network
	name string
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.n
	n.mu.Lock()
	defer n.mu.Unlock()
	remote := c.RemoteAddr().String()
	from, known := n.dialers[remote]
	fc := n.wrapLocked(c, from, l.name, true)
	if !known {
		// The dialer may not have registered yet; it fixes us up when it does.
		n.conns[len(n.conns)-1].remote = remote
	}
	return fc, nil
}

// Dialer dials on behalf of the endpoint named from (its node's listen
// address), so partitions involving from apply to what it dials.
func (n *Network) Dialer(from string) *Dialer { return &Dialer{n: n, from: from} }

// Dialer makes wrapped TCP connections for one endpoint.
type Dialer struct {
	n    *Network
	from string
}

// DialContext dials addr, failing or blocking as a partition requires.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n := d.n
	n.mu.Lock()
	mode, parted := n.parts[orderedPair(d.from, addr)]
	n.mu.Unlock()
	if parted {
		opErr := func(err error) error { return &net.OpError{Op: "dial", Net: network, Err: err} }
		switch mode {
		case Refuse:
			return nil, opErr(ErrPartitioned)
		case Swallow:
			// The far end of the pipe is never read or written.
			near, _ := Pipe(nil, nil)
			n.mu.Lock()
			defer n.mu.Unlock()
			n.conns = append(n.conns, &tracked{c: near, from: d.from, to: addr})
			return near, nil
		}
		<-ctx.Done()
		return nil, opErr(fmt.Errorf("%w: %w", ErrPartitioned, ctx.Err()))
	}
	n.mu.Lock()
	pl := n.pipes[addr]
	n.mu.Unlock()
	if pl != nil {
		return pl.dial(ctx, d.from)
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	local := c.LocalAddr().String()
	n.dialers[local] = d.from
	for _, t := range n.conns {
		if t.remote == local && t.from == "" {
			t.from, t.remote = d.from, ""
		}
	}
	fc := n.wrapLocked(c, d.from, addr, false)
	n.applyLocked()
	return fc, nil
}

// Endpoints lists the names of the endpoints of every tracked connection,
// as "from→to" pairs, for test failure messages.
func (n *Network) Endpoints() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.conns))
	for _, t := range n.conns {
		out = append(out, t.from+"→"+t.to)
	}
	return slices.Compact(out)
}
