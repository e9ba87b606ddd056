package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
)

// Envelopes to one peer travel in batches: each wire message on the
// application stream holds one or more envelopes, each preceded by its
// length (uvarint). Sending an envelope then costs an append; the wire's
// per-message work (queueing, scheduling, credit) is paid once per batch.
//
// A peer's envelopes are spread over lanes by key token (by request id
// for replies and cancels). A lane is one wire ordering key, so one
// sender's messages to one key keep their order.
//
// An envelope larger than a frame never joins a batch: it goes alone,
// under a wire key of its own key (divertKey), queued to follow what its
// lane holds so far (transport's SendAfter), so the lane's later batches
// go ahead of its frames (wire sends messages that fit a frame first) and
// a small message never waits for it to cross. Until the peer has taken
// every envelope sent under that divert key, the key's later messages
// follow it there instead of joining the lane: a small message to a key
// sent after a large one to that key still arrives after it.
const (
	numLanes = 8
	// batchMax is the size at which a lane is sent at once by the caller
	// rather than left for the flusher.
	batchMax = 64 << 10
	// largeEnvelope is the size above which an envelope goes alone: it
	// would take more than one frame of the transport's (flow's
	// DefaultMaxFrame, the transport's small-envelope bound).
	largeEnvelope = flow.DefaultMaxFrame - 64
)

// divertKey is the wire ordering key of key's envelopes that go alone.
// Lane keys are small numbers; a collision between two keys only orders
// their envelopes more strictly.
func divertKey(key uint64) uint64 { return key | 1<<63 }

// outbox is what this node has to send to one peer.
type outbox struct {
	r       *Router
	to      ring.NodeID
	epoch   uint64      // the router's epoch when it was made
	running atomic.Bool // a flusher goroutine is at work
	// dropped: the pruner forgot it (see prune.go), setting it with
	// every lane locked; sends go to the peer's next outbox.
	dropped atomic.Bool
	lanes   [numLanes]lane
}

type lane struct {
	mu   sync.Mutex
	buf  []byte   // framed envelopes not yet handed to wire
	prev tellHead // the last envelope in buf, for the next to refer to
	next int      // capacity for the next batch: the size of the last one, and some
	// diverted counts, per key, the envelopes sent under the key's
	// divertKey that the peer has not taken yet; nil while none.
	diverted map[uint64]int
	// alone counts the envelopes being encoded to go alone, the lock
	// released meanwhile (see alone): the outbox is not idle.
	alone int
	_     [8]byte // to 128 bytes: lanes apart in cache
}

// outboxFor returns the outbox of to, creating it.
func (r *Router) outboxFor(to ring.NodeID) *outbox {
	// The epoch check: a lookup racing with SetEndpoint may store an
	// outbox of the old endpoint after SetEndpoint cleared lastOut.
	// A dropped outbox may still be found here for a moment (a map
	// loaded before the pruner replaced it); under outboxMu, never.
	if o := r.lastOut.Load(); o != nil && o.to == to && o.epoch == r.epoch.Load() && !o.dropped.Load() {
		return o
	}
	if m := r.outboxes.Load(); m != nil {
		if o := (*m)[to]; o != nil && !o.dropped.Load() {
			r.lastOut.Store(o)
			return o
		}
	}
	r.outboxMu.Lock()
	defer r.outboxMu.Unlock()
	var m map[ring.NodeID]*outbox
	if cur := r.outboxes.Load(); cur != nil {
		if o := (*cur)[to]; o != nil {
			return o
		}
		m = maps.Clone(*cur)
	} else {
		m = map[ring.NodeID]*outbox{}
	}
	o := &outbox{r: r, to: to, epoch: r.epoch.Load()}
	m[to] = o
	r.outboxes.Store(&m)
	return o
}

// laneOf picks the lane of an ordering key.
func laneOf(key uint64) int { return int(key % numLanes) }

// enqueue adds e to the lane of key. With now set (asks, replies: someone
// waits) or once the lane holds batchMax bytes, the caller sends the lane
// itself and gets the transport's error; otherwise a flusher sends it soon.
func (o *outbox) enqueue(key uint64, e *envelope, now bool) error {
	return o.enqueueBody(key, e, nil, nil, now, unsent{})
}

// unsent ties an envelope that goes alone to its sender: the transport
// drops what of it was not written once ctx ends (nil: never), and done,
// if set, runs once the peer took it or it was dropped.
type unsent struct {
	ctx  context.Context
	done func(err error) // with why it was not delivered, or nil
}

// enqueueBody is enqueue with e's body given as for appendBody: a tell's
// message encoded straight into the lane's batch. u applies if e goes
// alone (see largeEnvelope).
func (o *outbox) enqueueBody(key uint64, e *envelope, enc host.MessageAppender, m any, now bool, u unsent) error {
	i := laneOf(key)
	l := &o.lanes[i]
	l.mu.Lock()
	if o.dropped.Load() {
		// Forgotten by the pruner since it was looked up: it sends no
		// more, so nothing sent through the next one overtakes this.
		l.mu.Unlock()
		return o.r.outboxFor(o.to).enqueueBody(key, e, enc, m, now, u)
	}
	if enc == nil && (len(e.body) > largeEnvelope || l.diverted[key] > 0) {
		return o.alone(i, l, key, e, nil, nil, u) // unlocks l.mu
	}
	if l.buf == nil {
		l.buf = o.r.endpoint().Buffer(max(l.next, 64))
	}
	// Encoded straight into the batch, a message is measured there (its
	// body, as on every other path), and taken out again when over the
	// limit, or too large for a batch, or for a key that goes alone.
	start, prev := len(l.buf), l.prev
	l.buf = e.appendFramedBody(l.buf, &l.prev, enc, m)
	limit := o.r.maxMessage()
	tooLarge := enc != nil && limit > 0 && e.encoded > limit
	if enc != nil && (tooLarge || e.encoded > largeEnvelope || l.diverted[key] > 0) {
		l.prev = prev
		if cap(l.buf) > 2*batchMax {
			// Grown for the message: keep the batch, not the room.
			l.buf = append(o.r.endpoint().Buffer(max(start, l.next, 64)), l.buf[:start]...)
		} else {
			l.buf = l.buf[:start]
		}
		if tooLarge {
			l.mu.Unlock()
			return fmt.Errorf("%w: %T of %d bytes, limit %d", fault.ErrMessageTooLarge, m, e.encoded, limit)
		}
		return o.alone(i, l, key, e, enc, m, u) // unlocks l.mu
	}
	if now || len(l.buf) >= batchMax {
		err := o.flushLocked(i, l)
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	// Load first: a steady stream finds the flusher running, and a
	// failed compare-and-swap costs as much as a successful one.
	if !o.running.Load() && o.running.CompareAndSwap(false, true) {
		go o.flush()
	}
	return nil
}

// alone sends e by itself under the divert key of key: behind what the
// lane holds (which it sends first), unless the key's earlier messages
// went alone too and the peer did not take them all yet. l.mu held;
// alone releases it.
func (o *outbox) alone(i int, l *lane, key uint64, e *envelope, enc host.MessageAppender, m any, u unsent) error {
	// Encoded without the lock: copying a large message takes a while,
	// and the lane's other senders would wait. Where it goes is decided
	// once it is encoded; a sender's own messages keep their order, as
	// it sends the next one after this one returns.
	l.alone++ // the outbox is not idle meanwhile: the pruner keeps it
	l.mu.Unlock()
	b := e.appendFramedBody(make([]byte, 0, max(len(e.body), e.encoded)+256), nil, enc, m)
	l.mu.Lock()
	l.alone--
	defer l.mu.Unlock()
	ctx := u.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ep := o.r.endpoint()
	var rc *transport.Receipt
	var err error
	if l.diverted[key] > 0 {
		rc, err = ep.Send(ctx, o.to, transport.StreamApplication, divertKey(key), b)
	} else {
		if err := o.flushLocked(i, l); err != nil {
			return err
		}
		rc, err = ep.SendAfter(ctx, o.to, transport.StreamApplication, divertKey(key), uint64(i+1), b)
	}
	if err != nil {
		return unavailable(o.to, err)
	}
	if l.diverted == nil {
		l.diverted = map[uint64]int{}
	}
	l.diverted[key]++
	go func() {
		<-rc.Done()
		l.mu.Lock()
		if l.diverted[key]--; l.diverted[key] == 0 {
			delete(l.diverted, key)
		}
		l.mu.Unlock()
		if u.done != nil {
			u.done(rc.Err())
		}
	}()
	return nil
}

// flushLocked hands the lane's batch to wire; l.mu held, so a lane's
// batches reach wire in order.
func (o *outbox) flushLocked(i int, l *lane) error {
	if len(l.buf) == 0 {
		return nil
	}
	batch := l.buf
	// wire takes the batch (and reuses its buffer once the peer consumed
	// it): the next one starts in another buffer, sized for a batch like
	// this one so that it rarely grows by copying.
	l.buf, l.prev = nil, tellHead{}
	l.next = min(len(batch)+len(batch)/4, batchMax+batchMax/4)
	if err := o.r.endpoint().Post(o.to, transport.StreamApplication, uint64(i+1), batch); err != nil {
		return unavailable(o.to, err)
	}
	return nil
}

// flush sends the lanes' batches until they stay empty. It yields a few
// times before it ends, so that a steady stream of sends finds it running
// and batches build up while it hands the previous batch to wire.
func (o *outbox) flush() {
	for idle := 0; ; {
		sent := false
		for i := range o.lanes {
			l := &o.lanes[i]
			l.mu.Lock()
			if len(l.buf) > 0 {
				sent = true
				if err := o.flushLocked(i, l); err != nil {
					o.r.log.Debug("troupe: batch to peer dropped", "peer", o.to, "err", err)
				}
			}
			l.mu.Unlock()
		}
		if sent {
			idle = 0
			continue
		}
		if idle < 3 {
			idle++
			runtime.Gosched()
			continue
		}
		o.running.Store(false)
		// A sender that appended after the last pass saw running set and
		// left the batch to this goroutine: look once more.
		if !o.pending() || !o.running.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

func (o *outbox) pending() bool {
	for i := range o.lanes {
		l := &o.lanes[i]
		l.mu.Lock()
		n := len(l.buf)
		l.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// appendFramed appends e's length and encoding to b, a batch whose
// previous envelope prev describes (see appendNextBody).
func (e *envelope) appendFramed(b []byte, prev *tellHead) []byte {
	return e.appendFramedBody(b, prev, nil, nil)
}

// appendFramedBody is appendFramed with e's body given as for appendBody.
func (e *envelope) appendFramedBody(b []byte, prev *tellHead, enc host.MessageAppender, m any) []byte {
	start := len(b)
	b = append(b, 0) // room for a one-byte length: most envelopes are short
	b = e.appendNextBody(b, prev, enc, m)
	return putLength(b, start)
}

// putLength writes, as a uvarint at b[start], the length of what follows
// it in b, for which one byte was reserved there.
func putLength(b []byte, start int) []byte {
	n := len(b) - start - 1
	if n < 0x80 {
		b[start] = byte(n)
		return b
	}
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(n))
	b = append(b, lb[1:k]...) // room for the rest of the length
	copy(b[start+k:], b[start+1:start+1+n])
	copy(b[start:], lb[:k])
	return b
}

// splitBatch calls f with each envelope of a batch, in order. It stops at
// the first malformed length.
func splitBatch(b []byte, f func([]byte)) error {
	for len(b) > 0 {
		p, rest, ok := nextInBatch(b)
		if !ok {
			return fmt.Errorf("%w: batch framing", ErrMalformed)
		}
		f(p)
		b = rest
	}
	return nil
}

// nextInBatch splits the first envelope p, length-prefixed, off batch b;
// ok is false when the framing is malformed.
func nextInBatch(b []byte) (p, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	end := k + int(n)
	return b[k:end:end], b[end:], true
}
