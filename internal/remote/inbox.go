package remote

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/wire"
)

// Receiving runs in two stages, so that a busy peer's messages use two
// cores: wire's delivery goroutine for the peer splits each batch,
// decodes the envelopes and decides where each goes (stage one); a
// worker goroutine per peer decodes the messages and queues them in the
// mailboxes (stage two, DeliverRemote, the larger half of the work).
//
// Order holds: stage one hands every tell to the worker, and an ask or a
// cancel also goes to the worker while it has work, so nothing overtakes
// what the same peer sent before. An ask that finds the worker idle is
// served at once, sparing its latency the hop. The worker's queue is
// bounded: when it is full, stage one waits, and wire's credit stops the
// peer.

// inboxDepth bounds the batches waiting for a peer's worker.
const inboxDepth = 64

// inbox is the stage-two queue of one peer.
type inbox struct {
	r       *Router
	ch      chan *[]inItem
	pending atomic.Int64 // items queued or being handled
	running atomic.Bool
	run     tellRun // the worker's, for DeliverTells
}

// inItem is one envelope that passed stage one: a tell to queue (k set),
// or an ask or cancel to serve.
type inItem struct {
	from wire.NodeID
	k    host.RemoteKind
	e    envelope
}

func (r *Router) inboxFor(from wire.NodeID) *inbox {
	if b, ok := r.inboxes.Load(from); ok {
		return b.(*inbox)
	}
	b, _ := r.inboxes.LoadOrStore(from, &inbox{r: r, ch: make(chan *[]inItem, inboxDepth)})
	return b.(*inbox)
}

// inItems recycles the item slices of batches: a batch's items travel
// from stage one to the worker, which clears and returns them.
var inItems = sync.Pool{New: func() any {
	s := make([]inItem, 0, 64)
	return &s
}}

// busy reports whether the worker has work queued or running.
func (b *inbox) busy() bool { return b.pending.Load() > 0 }

// push hands items to the worker, starting it if it is not running.
func (b *inbox) push(items *[]inItem) {
	n := int64(len(*items))
	b.pending.Add(n)
	select {
	case b.ch <- items:
	case <-b.r.ctx.Done():
		b.pending.Add(-n)
		return
	}
	if b.running.CompareAndSwap(false, true) {
		go b.work()
	}
}

// work handles queued batches until the queue stays empty.
func (b *inbox) work() {
	for idle := 0; ; {
		select {
		case items := <-b.ch:
			idle = 0
			b.serve(*items)
			// Counted down once the whole batch is done: an ask arriving
			// meanwhile waits its turn here, which keeps order.
			b.pending.Add(-int64(len(*items)))
			clear(*items)
			*items = (*items)[:0]
			inItems.Put(items)
			continue
		case <-b.r.ctx.Done():
			b.running.Store(false)
			return
		default:
		}
		if idle < 3 {
			idle++
			runtime.Gosched()
			continue
		}
		b.running.Store(false)
		// A batch pushed after the last look found the worker running:
		// look once more.
		if len(b.ch) == 0 || !b.running.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

// serve is stage two for one batch: runs of tells to one kind go to it
// together (DeliverTells), the rest one by one.
func (b *inbox) serve(items []inItem) {
	for i := 0; i < len(items); {
		it := &items[i]
		if it.e.kind != kindTell {
			b.r.serveQueued(it)
			i++
			continue
		}
		j := i + 1
		for j < len(items) && items[j].e.kind == kindTell && items[j].k == it.k {
			j++
		}
		b.run = tellRun{r: b.r, items: items[i:j]}
		it.k.DeliverTells(&b.run)
		b.run = tellRun{}
		i = j
	}
}

// tellRun is a run of tells to one kind (host.TellBatch).
type tellRun struct {
	r     *Router
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
	t.r.log.Debug("troupe: tell from another node dropped", "from", it.from, "actor", it.e.typ+"/"+it.e.key, "err", err)
}
