package membership

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// MemNetwork is an in-memory network with a virtual clock, for tests and
// simulations. Everything that happens on it (deliveries, scheduled
// callbacks) happens in one order fixed by the seed: run the same script
// with the same seed and get the same trace. It can drop and delay
// messages, partition addresses into groups, and pause an endpoint (its
// inbound messages wait, as in a kernel buffer, until it resumes).
//
// The network runs callbacks on the goroutine that calls Run; it starts no
// goroutines. Its methods are safe for concurrent use, but determinism
// holds only when a single goroutine drives it.
type MemNetwork struct {
	mu        sync.Mutex
	now       time.Time
	rng       *rand.Rand
	seq       uint64
	queue     eventQueue
	endpoints map[string]*MemEndpoint
	minDelay  time.Duration
	maxDelay  time.Duration
	dropRate  float64
	groups    map[string]int
	codec     bool
	stats     MemStats
}

// MemStats counts what the network carried.
type MemStats struct {
	Sent, Delivered, Dropped uint64
}

// MemOptions configures a MemNetwork. The zero value is a lossless network
// with a 1 ms delay, starting at the Unix epoch.
type MemOptions struct {
	// Seed fixes the order of everything random. Default 0 (still fixed).
	Seed uint64
	// Start is the virtual time at which the clock starts. Default the Unix
	// epoch.
	Start time.Time
	// MinDelay and MaxDelay bound the one-way delay of a message, drawn
	// uniformly. Default 1 ms each.
	MinDelay, MaxDelay time.Duration
	// DropRate is the probability in [0, 1] that a message is lost.
	// Default 0.
	DropRate float64
	// Codec, when set, passes every message through EncodeMessage and
	// DecodeMessage, as a real transport would. Default false.
	Codec bool
}

// NewMemNetwork returns a network configured by opts.
func NewMemNetwork(opts MemOptions) *MemNetwork {
	if opts.Start.IsZero() {
		opts.Start = time.Unix(0, 0).UTC()
	}
	if opts.MinDelay == 0 && opts.MaxDelay == 0 {
		opts.MinDelay, opts.MaxDelay = time.Millisecond, time.Millisecond
	}
	if opts.MaxDelay < opts.MinDelay {
		opts.MaxDelay = opts.MinDelay
	}
	return &MemNetwork{
		now:       opts.Start,
		rng:       rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d)),
		endpoints: make(map[string]*MemEndpoint),
		minDelay:  opts.MinDelay,
		maxDelay:  opts.MaxDelay,
		dropRate:  opts.DropRate,
		groups:    make(map[string]int),
		codec:     opts.Codec,
	}
}

// Now returns the virtual time.
func (n *MemNetwork) Now() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.now
}

// Stats returns the message counters.
func (n *MemNetwork) Stats() MemStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// SetDropRate changes the loss probability for messages sent from now on.
func (n *MemNetwork) SetDropRate(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropRate = p
}

// Partition splits the addresses into the given groups: messages between
// different groups are dropped, including those already in flight.
// Addresses not listed form one more group together.
func (n *MemNetwork) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.groups = make(map[string]int)
	for i, g := range groups {
		for _, a := range g {
			n.groups[a] = i + 1
		}
	}
}

// Heal removes every partition.
func (n *MemNetwork) Heal() { n.Partition() }

// Endpoint attaches a new endpoint at addr whose received messages go to
// handler, called from Run. It replaces any endpoint at addr (a restart).
func (n *MemNetwork) Endpoint(addr string, handler func(from string, m Message)) *MemEndpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.endpoints[addr]; old != nil {
		old.closed = true
	}
	ep := &MemEndpoint{net: n, addr: addr, handler: handler, lastHeard: make(map[string]time.Time)}
	n.endpoints[addr] = ep
	return ep
}

// Schedule runs fn at virtual time at (or now, if at is past) from Run.
func (n *MemNetwork) Schedule(at time.Time, fn func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.push(at, fn)
}

func (n *MemNetwork) push(at time.Time, fn func()) {
	if at.Before(n.now) {
		at = n.now
	}
	n.seq++
	heap.Push(&n.queue, &event{at: at, seq: n.seq, fn: fn})
}

// RunUntil runs every event due up to and including t, in order, then sets
// the clock to t.
func (n *MemNetwork) RunUntil(t time.Time) {
	for {
		n.mu.Lock()
		if len(n.queue) == 0 || n.queue[0].at.After(t) {
			if n.now.Before(t) {
				n.now = t
			}
			n.mu.Unlock()
			return
		}
		e := heap.Pop(&n.queue).(*event)
		n.now = e.at
		n.mu.Unlock()
		e.fn()
	}
}

// RunFor runs the network for d of virtual time.
func (n *MemNetwork) RunFor(d time.Duration) { n.RunUntil(n.Now().Add(d)) }

func (n *MemNetwork) connected(a, b string) bool { return n.groups[a] == n.groups[b] }

// MemEndpoint is one node's attachment to a MemNetwork. It implements
// Transport.
type MemEndpoint struct {
	net       *MemNetwork
	addr      string
	handler   func(from string, m Message)
	paused    bool
	closed    bool
	held      []func()
	lastHeard map[string]time.Time
	dead      []ring.NodeID
}

var _ Transport = (*MemEndpoint)(nil)

// Send schedules delivery of msg to addr after the network's delay, unless
// the message is lost, the endpoints are partitioned, or either is closed.
func (e *MemEndpoint) Send(ctx context.Context, addr string, msg Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := e.net
	if n.codec {
		b, err := EncodeMessage(msg)
		if err != nil {
			return err
		}
		if msg, err = DecodeMessage(b); err != nil {
			return fmt.Errorf("troupe: memnet round trip: %w", err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Sent++
	if e.closed || !n.connected(e.addr, addr) || (n.dropRate > 0 && n.rng.Float64() < n.dropRate) {
		n.stats.Dropped++
		return nil
	}
	delay := n.minDelay
	if span := n.maxDelay - n.minDelay; span > 0 {
		delay += time.Duration(n.rng.Int64N(int64(span) + 1))
	}
	from := e.addr
	n.push(n.now.Add(delay), func() { n.deliver(from, addr, msg) })
	return nil
}

func (n *MemNetwork) deliver(from, to string, msg Message) {
	n.mu.Lock()
	dst := n.endpoints[to]
	if dst == nil || dst.closed || !n.connected(from, to) {
		n.stats.Dropped++
		n.mu.Unlock()
		return
	}
	if dst.paused {
		dst.held = append(dst.held, func() { n.deliver(from, to, msg) })
		n.mu.Unlock()
		return
	}
	n.stats.Delivered++
	dst.lastHeard[from] = n.now
	h := dst.handler
	n.mu.Unlock()
	h(from, msg)
}

// LastHeard returns when a message from addr was last delivered here.
func (e *MemEndpoint) LastHeard(addr string) time.Time {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	return e.lastHeard[addr]
}

// PeerDead records that id is dead; see DeadPeers.
func (e *MemEndpoint) PeerDead(id ring.NodeID) {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.dead = append(e.dead, id)
}

// DeadPeers returns the identities reported through PeerDead.
func (e *MemEndpoint) DeadPeers() []ring.NodeID {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	return append([]ring.NodeID(nil), e.dead...)
}

// Pause holds every message for this endpoint until Resume, as a stopped
// process leaves its data in the kernel.
func (e *MemEndpoint) Pause() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.paused = true
}

// Resume delivers the held messages, in arrival order, and lets new ones
// through.
func (e *MemEndpoint) Resume() {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	e.paused = false
	for _, fn := range e.held {
		n.push(n.now, fn)
	}
	e.held = nil
}

// Paused reports whether the endpoint is paused.
func (e *MemEndpoint) Paused() bool {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	return e.paused
}

// Close detaches the endpoint: messages to and from it are dropped, as
// when its process is killed.
func (e *MemEndpoint) Close() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.closed = true
	e.held = nil
}

type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
