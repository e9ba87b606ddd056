package remote

import (
	"runtime"
	"sync/atomic"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/ring"
)

// Receiving runs in two stages, so that a busy peer's messages use two
// cores: the transport's delivery goroutine for the peer splits each batch and
// sorts its envelopes by their kind byte (stage one); a worker goroutine
// per peer decodes the envelopes it was handed, decides where each goes,
// and decodes and queues the messages (stage two, DeliverTells: the
// larger part of the work). Stage one hands the worker whole runs of
// envelopes (segments of the batch), so it allocates nothing per message,
// and the worker decodes them into a slice of its own, reused.
//
// Order holds: stage one hands every tell to the worker, and an ask or a
// cancel also goes to the worker while it has work, so nothing overtakes
// what the same peer sent before. An ask that finds the worker idle is
// served at once, sparing its latency the hop. When the transport's reader
// delivers the batch itself (transport.DeferHandler), the first such ask whose
// actor is idle is even run there: stage one claims the actor's cell
// (the runtime's DeliverRemoteInline) and the handler runs once the transport released the
// batch, so a handler that blocks holds neither the stream nor the
// cancels that follow it, and its reply is written from that goroutine
// too. The worker's queue is bounded: when it is full, stage one waits,
// and the transport's credit stops the peer.

// inboxDepth bounds the segments waiting for a peer's worker.
const inboxDepth = 64

// inbox is the stage-two queue of one peer.
type inbox struct {
	r       *Router
	from    ring.NodeID
	ch      chan segment
	pending atomic.Int64 // segments queued or being handled
	running atomic.Bool
	// The worker's own, reused from segment to segment.
	items []inItem
	run   tellRun
	free  freeKey  // the last key found free of hand-off holds
	last  tellHead // the last envelope of the segment before
	// asked holds the strings of the last ask stage one decoded, for
	// the next to reuse (decoder.stringAs): an asker mostly repeats its
	// type, key and request name. Atomic, as stage one may run on more
	// than one goroutine while a connection is replaced; ok stays false,
	// so no tell continues it.
	asked atomic.Pointer[tellHead]
	// askFree is the freeKey of the asks served, by stage one or the
	// worker (see holdIfNeededShared).
	askFree atomic.Pointer[freeKey]
	// noticed is when this member last sent the peer, a client, its
	// placement version unasked (see noticeStale): nanoseconds since the
	// router started, 0 for never.
	noticed atomic.Int64
	// For the pruner (see prune.go): users counts the stage ones at work
	// with the inbox (enter), dropped marks it forgotten, heard is set by
	// a batch and cleared by each pass of the pruner, which notes in
	// heardAt (its clock) when it last found it set.
	users   atomic.Int32
	dropped atomic.Bool
	heard   atomic.Bool
	heardAt atomic.Int64
}

// segment is a run of a batch's envelopes, framed as in the batch, for
// the worker. whole says it is the whole batch and holds tells only: the
// worker then gives the batch back to the transport for reuse once it
// handled it, as nothing it keeps aliases the batch (messages decode into
// values of their own; tells held for a hand-off or forwarded are copied;
// the strings decoded are copies).
type segment struct {
	b     []byte
	whole bool
}

// inItem is one envelope the worker decoded: a tell to queue (k set), or
// an ask or cancel to serve (from set: tells leave it zero, which spares
// writing a string per tell).
type inItem struct {
	rt *route // a tell's: its kind queues it (a pointer compares cheaper than the kind)
	e  envelope
}

// inboxFor returns the inbox of from, making it (heard: the pruner keeps
// it for a clientExpiry at least).
func (r *Router) inboxFor(from ring.NodeID) *inbox {
	if b, ok := r.inboxes.Load(from); ok {
		return b.(*inbox)
	}
	nb := &inbox{r: r, from: from, ch: make(chan segment, inboxDepth)}
	nb.heard.Store(true)
	b, _ := r.inboxes.LoadOrStore(from, nb)
	return b.(*inbox)
}

// busy reports whether the worker has work queued or running.
func (b *inbox) busy() bool { return b.pending.Load() > 0 }

// push hands a segment to the worker, starting it if it is not running.
func (b *inbox) push(seg segment) {
	b.pending.Add(1)
	select {
	case b.ch <- seg:
	case <-b.r.ctx.Done():
		b.pending.Add(-1)
		return
	}
	if b.running.CompareAndSwap(false, true) {
		go b.work()
	}
}

// work handles queued segments until the queue stays empty.
func (b *inbox) work() {
	for idle := 0; ; {
		select {
		case seg := <-b.ch:
			idle = 0
			b.handle(seg.b)
			if seg.whole {
				b.r.endpoint().Release(seg.b)
			}
			// Counted down once the segment is done: an ask arriving
			// meanwhile waits its turn here, which keeps order.
			b.pending.Add(-1)
			continue
		case <-b.r.ctx.Done():
			b.release()
			b.running.Store(false)
			return
		default:
		}
		if idle < 3 {
			idle++
			runtime.Gosched()
			continue
		}
		b.release()
		b.running.Store(false)
		// A segment pushed after the last look found the worker running:
		// look once more.
		if len(b.ch) == 0 || !b.running.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

// release drops the items' references into the last batches (the
// envelopes alias them), so that an idle worker keeps none alive. It runs
// while the worker still counts as running: the next worker reuses items.
// Clearing after every chunk instead cost the worker a pass over the
// items with write barriers while the collector ran (about 5% of a
// remote-tell node's CPU); decode zeroes each item it reuses anyway.
func (b *inbox) release() {
	clear(b.items[:cap(b.items)])
	b.items = b.items[:0]
}

// chunkItems is how many envelopes the worker decodes before it serves
// them: its item slice stays that small however large the batches.
const chunkItems = 256

// handle is stage two for one segment, a chunk at a time.
func (b *inbox) handle(seg []byte) {
	// The strings of the segment before are there to reuse: a peer's
	// batches mostly repeat them. No tell of this segment continues one
	// of the last (a batch starts afresh), hence ok false.
	c := chunker{prev: b.last}
	c.prev.ok = false
	for len(seg) > 0 {
		seg = b.decode(seg, &c)
		b.serve(b.items)
	}
	b.last = c.prev
}

// chunker is what decoding a segment carries from chunk to chunk.
type chunker struct {
	prev tellHead // the envelope before, for a kindTellNext
	rt   *route   // of the last tell: a batch mostly holds one type
	// rtTyp is rt's type as the envelopes spell it: the string they
	// repeat, which compares equal without reading its bytes.
	rtTyp string
	// here is the view under which the last tell was found to be this
	// node's to serve (nil: it was not, or no tell came yet). The owner
	// of a key is a function of the view, so a tell to the same key
	// under the same view is this node's too.
	here *view
}

// tellFirst places a tell whose key may differ from the last one's (see
// Router.tellHere).
func (b *inbox) tellFirst(e *envelope, c *chunker) (*route, bool) {
	// Loaded before tellHere reads it: if the view moves in between,
	// c.here is older than the view tellHere used and the next tell
	// takes the full path.
	v := b.r.view.Load()
	_, keep := b.r.tellHere(b.from, e, c.rt, &b.free) // the kind is c.rt's when kept
	c.here = nil
	if !keep {
		return nil, false
	}
	c.here = v
	return c.rt, true
}

// tellAgain places a tell to the key of the tell before it: when that
// one was this node's under the current view, so is this one, and only
// a hand-over window can still hold it.
func (b *inbox) tellAgain(e *envelope, c *chunker) (*route, bool) {
	if c.here == nil || c.here != b.r.view.Load() {
		return b.tellFirst(e, c)
	}
	if b.r.holdIfNeeded(b.from, c.rt.k, e, &b.free) {
		return nil, false
	}
	return c.rt, true
}

// decode decodes up to chunkItems envelopes of seg into the worker's
// item slice, and places its tells: those served elsewhere are forwarded
// or dropped here. It returns the rest of seg.
func (b *inbox) decode(seg []byte, c *chunker) []byte {
	r := b.r
	q := b.items[:0]
	for len(seg) > 0 && len(q) < chunkItems {
		p, rest, _ := nextInBatch(seg) // stage one checked the framing
		seg = rest
		// Decode in place, where serve will find it.
		q = append(q, inItem{})
		it := &q[len(q)-1]
		keep := false
		if c.rt != nil && c.rtTyp == c.prev.typ && it.e.decodeRepeat(p, &c.prev) {
			it.rt, keep = b.tellAgain(&it.e, c)
		} else if err := it.e.decode(p, &c.prev); err != nil {
			r.log.Warn("troupe: dropped application envelope", "from", b.from, "err", err)
		} else if it.e.kind != kindTell {
			keep = true
		} else {
			if c.rt == nil || c.rtTyp != it.e.typ {
				c.rt, c.rtTyp = r.routeOf(it.e.typ), it.e.typ
			}
			it.rt, keep = b.tellFirst(&it.e, c) // else forwarded or dropped
		}
		if !keep {
			*it = inItem{}
			q = q[:len(q)-1]
		}
	}
	b.items = q
	return seg
}

// serve is stage two for the items of one segment: runs of tells to one
// kind go to it together (DeliverTells), the rest one by one.
func (b *inbox) serve(items []inItem) {
	for i := 0; i < len(items); {
		it := &items[i]
		if it.e.kind != kindTell {
			b.r.serveQueued(b.from, &it.e, &b.askFree)
			i++
			continue
		}
		if it.e.trace != nil {
			// A run carries no trace contexts: this one goes alone.
			if _, err := it.rt.k.DeliverRemote(host.Inbound{Key: it.e.key, Name: it.e.name, Body: it.e.body, Trace: it.e.trace}); err != nil {
				b.r.dropped(&it.e, err)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(items) && items[j].e.kind == kindTell && items[j].e.trace == nil && items[j].rt == it.rt {
			j++
		}
		b.run = tellRun{r: b.r, from: b.from, items: items[i:j]}
		it.rt.k.DeliverTells(&b.run)
		b.run = tellRun{}
		i = j
	}
}

// tellRun is a run of tells to one kind (host.TellBatch).
type tellRun struct {
	r     *Router
	from  ring.NodeID
	items []inItem
}

func (t *tellRun) Len() int { return len(t.items) }

func (t *tellRun) Tell(i int) (key, name string, body []byte) {
	e := &t.items[i].e
	return e.key, e.name, e.body
}

func (t *tellRun) Dropped(i int, err error) {
	it := &t.items[i]
	t.r.dropped(&it.e, err)
	t.r.log.Debug("troupe: tell from another node dropped", "from", t.from, "actor", it.e.typ+"/"+it.e.key, "err", err)
}
