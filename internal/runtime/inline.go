package runtime

import (
	"context"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// Inline runs. An ask from another node usually finds its actor idle:
// queueing it would wake (or start) the cell's goroutine, a hop through
// the Go scheduler that costs more than the handler. When the receiving
// goroutine can run the handler itself (the transport's reader, once it released
// the envelope: see transport.DeferHandler), DeliverRemoteInline claims the
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
// transport.DeferHandler). Otherwise it queues the ask as DeliverRemote does
// and run is nil.
func (k *kind[S, M, C]) DeliverRemoteInline(in host.Inbound) (cancel host.Withdrawer, run func(relieve func()), err error) {
	// A durable key's handler waits for its replicas, whose answers may
	// come through the very goroutine that would run it: never inline.
	if in.Reply == nil || in.Key == "" || (k.def.Durable && k.h.Store != nil) {
		cancel, err = k.DeliverRemote(in)
		return cancel, nil, err
	}
	m, err := codec.DecodeMessage[M](k.def.Codec, k.h, in.Name, in.Body)
	if err != nil {
		return nil, nil, err
	}
	s := k.remoteSlot(in)
	cancel = s
	if c := k.claim(in.Key, k.hash(in.Key)); c != nil {
		return cancel, func(relieve func()) { c.runClaimed(m, s, relieve) }, nil
	}
	if err := k.push(noWait, in.Key, 0, m, s, false, in.Trace); err != nil {
		return nil, nil, err
	}
	return cancel, nil, nil
}

// claim returns key's cell (h is key's hash), claimed for an inline run
// of one message on the caller's goroutine, if it is started and idle with
// nothing queued; nil otherwise.
func (k *kind[S, M, C]) claim(key string, h uint64) *cell[S, M, C] {
	c := k.shards[h>>58].t.get(h, key)
	if c == nil || !c.claimIdle() {
		return nil
	}
	return c
}

// relieveInline lets the goroutine running an inline handler, whose
// Context ctx is, hand its other work over before the handler waits for
// another node: that node's reply may need this very goroutine.
func relieveInline(ctx context.Context) {
	if r, ok := ctx.(interface{ relieveInline() }); ok {
		r.relieveInline()
	}
}

func (c *Base) relieveInline() {
	if r := c.relieve; r != nil {
		c.relieve = nil
		r()
	}
}

// claimIdle claims c for a run of one message on the caller's goroutine
// (the transport's reader) if it is started and idle with nothing queued.
func (c *cell[S, M, C]) claimIdle() bool {
	k := c.k
	c.mu.Lock()
	ok := !c.gone && !c.running && !c.backoff && c.started && len(c.in) == 0 && !k.h.Closed()
	if !ok && c.running && len(c.in) == 0 {
		// Its goroutine lingers, idle: let it exit after this message,
		// so that the next one runs inline.
		c.shed = true
	}
	if ok {
		c.running = true
		c.batchLen = 1 // the claimed message counts against the bound
		c.remaining.Store(1)
	}
	c.mu.Unlock()
	if ok {
		k.h.Enter() // Close waits for the run as for a goroutine's
	}
	return ok
}

// runClaimed handles m, the message c was claimed for, on the calling
// goroutine (the transport's reader, whose relieve hands reading on), then lets c
// go idle, or starts a goroutine for the mail that arrived meanwhile.
func (c *cell[S, M, C]) runClaimed(m M, s replier, relieve func()) {
	k := c.k
	defer k.h.Leave() // deferred: a handler may end the goroutine (Goexit)
	if c.run.Load() != nil {
		// No runner runs the cell now: its handler's tells must not be
		// stashed in the one that ran it last.
		c.run.Store(nil)
	}
	ls := k.coldState(c)
	ls.ctx.relieve = relieve
	work := ls.one[:]
	work[0] = envelope[M]{msg: m, slot: s}
	if met := k.tgt.met; met != nil && s == nil {
		met.Tells[host.OutcomeOK].Add(1)
	}
	ok := c.handleBatch(&ls.ctx, work, nil)
	k.putCold(ls)
	if ok {
		c.mu.Lock()
		if len(c.in) > 0 {
			c.batchLen = 0
			c.mu.Unlock()
			k.h.Enter()
			go c.loop()
		} else {
			c.idle(true) // likely asked again soon; the sweep stamps the time
		}
	} // else failed: the restart owns the cell and its mailbox
}
