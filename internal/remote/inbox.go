package remote

import (
	"runtime"
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
// served at once, sparing its latency the hop. When wire's reader
// delivers the batch itself (wire.DeferHandler), the first such ask whose
// actor is idle is even run there: stage one claims the actor's cell
// (actor.DeliverRemoteInline) and the handler runs once wire released the
// batch, so a handler that blocks holds neither the stream nor the
// cancels that follow it, and its reply is written from that goroutine
// too. The worker's queue is bounded: when it is full, stage one waits,
// and wire's credit stops the peer.

// inboxDepth bounds the batches waiting for a peer's worker.
const inboxDepth = 64

// inbox is the stage-two queue of one peer.
type inbox struct {
	r       *Router
	ch      chan []inItem
	pending atomic.Int64 // items queued or being handled
	running atomic.Bool
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
	b, _ := r.inboxes.LoadOrStore(from, &inbox{r: r, ch: make(chan []inItem, inboxDepth)})
	return b.(*inbox)
}

// busy reports whether the worker has work queued or running.
func (b *inbox) busy() bool { return b.pending.Load() > 0 }

// push hands items to the worker, starting it if it is not running.
func (b *inbox) push(items []inItem) {
	b.pending.Add(int64(len(items)))
	select {
	case b.ch <- items:
	case <-b.r.ctx.Done():
		b.pending.Add(-int64(len(items)))
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
			for i := range items {
				b.r.serveQueued(&items[i])
				b.pending.Add(-1)
			}
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
