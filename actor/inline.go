package actor

import (
	"context"

	"github.com/troupe-go/troupe/internal/host"
)

// Inline runs. An ask from another node usually finds its actor idle:
// queueing it would wake (or start) the cell's goroutine, a hop through
// the Go scheduler that costs more than the handler. When the receiving
// goroutine can run the handler itself (wire's reader, once it released
// the envelope: see wire.DeferHandler), DeliverRemoteInline claims the
// idle cell instead, as a goroutine of its own would (running set), and
// returns the run for the caller to make. Whatever reaches the key
// meanwhile queues in its mailbox behind the claimed message, so order
// per sender and key holds; a goroutine takes the mailbox over when the
// inline handler returns and mail waits.
//
// Only a started (activated) cell that is idle, not in backoff, with an
// empty mailbox is claimed. A cell whose goroutine lingers after a batch
// is running: the ask queues for that goroutine as before, but the
// goroutine exits once idle instead of lingering (shed), so the next ask
// finds the cell idle.

// DeliverRemoteInline is DeliverRemote for an ask whose caller can run the
// handler itself. If it claims the key's cell, it returns run, which the
// caller must call exactly once, on any goroutine; until then the cell
// counts as running and the message as queued (cancel drops it). The
// handler calls relieve (if not nil) before it waits for a reply from
// another node, which may come through the goroutine running it (see
// wire.DeferHandler). Otherwise it queues the ask as DeliverRemote does
// and run is nil.
func (k *kind[S, M]) DeliverRemoteInline(in host.Inbound) (cancel host.Withdrawer, run func(relieve func()), err error) {
	if in.Reply == nil || in.Key == "" {
		cancel, err = k.DeliverRemote(in)
		return cancel, nil, err
	}
	m, err := decodeMessage[M](k.def.codec, k.h, in.Name, in.Body)
	if err != nil {
		return nil, nil, err
	}
	s := k.remoteSlot(in)
	cancel = s
	if c := k.claim(in.Key); c != nil {
		return cancel, func(relieve func()) { c.runInline(m, s, relieve) }, nil
	}
	if err := k.push(noWait, in.Key, 0, m, s, false); err != nil {
		return nil, nil, err
	}
	return cancel, nil, nil
}

// claim returns key's cell, claimed for an inline run of one message, if
// it is started and idle with nothing queued; nil otherwise.
func (k *kind[S, M]) claim(key string) *cell[S, M] {
	h := k.hash(key)
	c := k.shards[h>>58].t.get(h, key)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	ok := !c.gone && !c.running && !c.backoff && c.started && len(c.in) == 0 && !k.h.Closed()
	if !ok && c.running && len(c.in) == 0 {
		// Its goroutine lingers, idle: let it exit after this message,
		// so that the next one runs inline.
		c.shed = true
	}
	if ok {
		c.running = true
		// The claimed message counts against the mailbox bound.
		c.batchLen = 1
		c.remaining.Store(1)
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	k.h.Enter() // Close waits for the run as for a goroutine's
	return c
}

// runInline handles m, the message c was claimed for, on the calling
// goroutine, then lets c go idle, or starts a goroutine for the mail that
// arrived meanwhile.
func (c *cell[S, M]) runInline(m M, s replier, relieve func()) {
	h := c.k.h
	defer h.Leave()
	if c.run.Load() != nil {
		// No runner runs the cell now: its handler's tells must not be
		// stashed in the one that ran it last.
		c.run.Store(nil)
	}
	work := []envelope[M]{{msg: m, slot: s}}
	if !c.handleBatch(&Context[S, M]{cell: c, relieve: relieve}, work, nil) {
		return // failed: the restart owns the cell and its mailbox
	}
	c.mu.Lock()
	if len(c.in) > 0 {
		c.batchLen = 0
		c.mu.Unlock()
		h.Enter()
		go c.loop()
		return
	}
	// As after a hand-off: the cell is likely busy again soon, and the
	// sweep stamps the idle time.
	c.idle(true)
}

// relieveInline lets the goroutine running an inline handler, whose
// Context ctx is, hand its other work over before the handler waits for
// another node: that node's reply may need this very goroutine.
func relieveInline(ctx context.Context) {
	if r, ok := ctx.(interface{ relieveInline() }); ok {
		r.relieveInline()
	}
}

func (c *Context[S, M]) relieveInline() {
	if r := c.relieve; r != nil {
		c.relieve = nil
		r()
	}
}
