package runtime

// Local asks run inline. An ask from outside any handler (no asking
// actor up its chain) to an idle actor of this system would queue the
// request, wake or start the cell's goroutine and park the asker until
// the reply wakes it again: two trips through the Go scheduler, most of
// an ask's latency. Instead the asker claims the idle cell, as a
// goroutine of its own would (running set), and runs the handler itself.
// Whatever reaches the key meanwhile queues behind the claimed message,
// so one message at a time per key and order per sender hold; a
// goroutine takes the mailbox over when the handler returns and mail
// waits. A handler that fails or panics restarts as on its goroutine.
//
// Nothing waits beside the handler, so nothing watches the asker's
// context or deadline unless the handler looks at them (Done, Err): the
// slot then arms a watch that cancels it, as the waiting asker would. A
// reply given after the asker would have stopped waiting is dropped and
// the ask fails with the context's error, as before. What differs: a
// handler that blocks without looking at its context holds the asker
// until it returns (the outcome is the same, the error comes late). A
// deferred reply is waited for as usual.
//
// Only a started cell that is idle, not in backoff, with an empty
// mailbox is claimed (a first ask activates on a goroutine as before);
// a cell whose goroutine lingers idle is told to exit after the ask it
// gets (shed), so the next ask finds it idle.

// askHere runs the ask m, whose slot s the caller (the asker, outside any
// handler) does not wait on yet, on the calling goroutine if key's cell
// is idle; false means the caller must deliver it as usual.
func (k *kind[S, M, C]) askHere(key string, h uint64, m M, s replier) bool {
	if k.rem != nil || h == 0 {
		return false
	}
	c := k.claim(key, h)
	if c == nil {
		return false
	}
	c.runClaimed(m, s, nil)
	return true
}

// claimIdle claims c for a run of one message on the caller's goroutine
// if it is started and idle with nothing queued.
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
// goroutine (an asker, or wire's reader, whose relieve hands reading on),
// then lets c go idle, or starts a goroutine for the mail that arrived
// meanwhile.
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
