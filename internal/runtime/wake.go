package runtime

import (
	"context"
	"math"
	"sync"
	"time"
)

// Waking keys with stored timers.
//
// A durable key's timers are part of its record, and an activation sets
// them again when it loads the record. What ends such an activation
// without a message to follow is its owner dying or stopping, the key
// moving (Moved), a failed commit, Release, or passivation: an idle key
// whose timers are all stored as they stand passivates with them
// (timersSavedLocked). The host's store then asks the key's owner (a new
// one, or the same member after a restart) to wake it when the first is
// due: WakeTimers queues a wakeStep in the key's cell, which activates
// it (adopting the newest record of its replicas) and runs no handler.

// WakeTimers implements host.TimerWaker.
func (k *kind[S, M, C]) WakeTimers(key string, done func(error)) {
	finish := func(err error) {
		if done != nil {
			done(err)
		}
	}
	if !k.def.Durable || k.h.Store == nil || k.h.Closed() {
		finish(nil)
		return
	}
	st := &wakeStep{done: finish}
	if k.rem != nil {
		tok := k.token(key)
		owned, err := k.rt.Owns(key, tok)
		if err != nil || !owned {
			finish(nil) // another member's to wake
			return
		}
		if here, err := k.rt.Here(key, tok); err != nil || !here {
			// Held for its previous owner (a hand-off): queued once that
			// owner drained it, as the messages held with it are.
			st.owned = true
			if k.rt.HoldWake(key, tok, func(owned bool) {
				if !owned {
					st.finish(nil)
					return
				}
				k.queueWake(key, st)
			}) {
				return
			}
			// The hold ended meanwhile.
		}
	}
	k.queueWake(key, st)
}

// queueWake queues st in key's cell.
func (k *kind[S, M, C]) queueWake(key string, st *wakeStep) {
	var none M
	if err := k.push(context.Background(), key, 0, none, st, true, nil); err != nil {
		st.finish(err)
	}
}

// wakeStep is a request to activate a key so that its stored timers are
// set again: queued in the cell's mailbox as a pruneStep is (whose
// replier methods it shares), it runs no handler. finish calls done
// once, whether the step ran or was dropped with the mailbox.
type wakeStep struct {
	pruneStep
	once sync.Once
	done func(error)
	// owned: queued after a hand-off's hold, which looked whether this
	// node owns the key; the cell then only looks again at placement.
	owned bool
}

func (st *wakeStep) finish(err error) { st.once.Do(func() { st.done(err) }) }

// wakeTimers runs st on the cell's goroutine: an activation that has not
// started yet starts, unless the key moved since WakeTimers looked.
func (c *cell[S, M, C]) wakeTimers(ctx *Context[S, M, C], st *wakeStep) {
	if c.started {
		st.finish(nil)
		return
	}
	if k := c.k; k.rem != nil {
		var here bool
		var err error
		if st.owned {
			here, err = k.rt.Owns(c.key, k.token(c.key))
		} else {
			here, err = k.rt.Here(c.key, k.token(c.key))
		}
		if err != nil || !here {
			st.finish(nil)
			return
		}
	}
	if err := c.activate(ctx); err != nil {
		ctx.unreached = false
		st.finish(err)
		return
	}
	ctx.confirmed = false // for the activation, not for the next message
	st.finish(nil)
	// The load dropped the kept answers past their retention, without
	// writing (a message's commit would): a key woken for them (see
	// RecordWakeDue) writes its record now, as a pruneStep does.
	c.mu.Lock()
	x := c.x
	c.mu.Unlock()
	if x == nil {
		return
	}
	ctx.gateMu.Lock()
	pruned := len(x.retained) != x.keptLoaded || c.pagesDue(x)
	ctx.gateMu.Unlock()
	if !pruned {
		return
	}
	c.handling(ctx)
	c.mu.Lock()
	x.recordChanged = true
	c.mu.Unlock()
	var e envelope[M]
	c.settle(ctx, &e, nil)
}

// RecordWakeDue reports whether b, a record as the runtime stores a
// durable key's state, needs its key woken with no message to it, and
// when: at its first timer, or once its oldest kept answer (of a keyed
// ask) or its first page of them has outlived retain (none if retain is
// not positive), when waking drops and writes it. It reads the record's header, timers and kept
// answers, without the types that decode its state, and reports false
// for a record whose header it cannot read (which an activation then
// reports); a record whose timers or answers it cannot read is due at
// once (the Unix epoch), so that its activation reports that too.
func RecordWakeDue(b []byte, retain time.Duration) (due time.Time, ok bool) {
	if len(b) == 0 || b[0] < recordVersion || b[0] > recordVersionNewest {
		return time.Time{}, false
	}
	r := recordReader{b: b[1:]}
	r.bytes() // the state
	n := r.uvarint()
	if r.err != nil {
		return time.Time{}, false
	}
	first := int64(math.MaxInt64)
	for range n {
		r.bytes() // name
		at := r.varint()
		r.varint() // period
		r.bytes()  // message type
		r.bytes()  // message
		if r.err != nil {
			return time.Unix(0, 0), true
		}
		first = min(first, at)
	}
	if b[0] >= recordVersionKept && retain > 0 {
		kept := r.uvarint()
		for range kept {
			at := r.answer(b[0], nil)
			if r.err != nil {
				return time.Unix(0, 0), true
			}
			// pruneRetained drops it then (or at once, dated ahead of
			// now by more than retain: a clock that went back).
			if at < math.MaxInt64-int64(retain) {
				first = min(first, at+int64(retain))
			}
		}
		if b[0] >= recordVersionPaged {
			// The next page to go by its age.
			if _, at := r.paged(); r.err != nil {
				return time.Unix(0, 0), true
			} else if at < math.MaxInt64-int64(retain) {
				first = min(first, at+int64(retain))
			}
		}
	}
	if first == math.MaxInt64 {
		return time.Time{}, false
	}
	return time.Unix(0, first), true
}
