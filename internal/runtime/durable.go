package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// Durable state.
//
// A kind whose Spec is Durable keeps each key's state in the host's Store
// (see host.Store). An activation first acquires its key (fencing any
// earlier owner) and reads the stored record: the state and the timers
// it had set, or, with no record, WithInit's state. The commit point stays
// SetState and Update, and output commit holds: before anything a handler
// sends leaves (Tell, Ask, Pipe, a reply, a declared error or a deferred
// reply given meanwhile) and at the end of each message,
// the Context writes the state if the message changed it, blocking the
// handler until the key's write level is met or the message's deadline
// passes. The reply is the exception when the store can write without
// blocking (asyncStore): a reply given after a change is held, the
// message's write goes on while the activation handles its next message,
// and the reply leaves once that write met the level (writes of a key
// meet it in order), or fails with ErrUnavailable if it did not by the
// message's deadline. An output of a message that changed nothing first confirms,
// once per message, that this node still owns the key (a read barrier):
// an owner fenced by a newer one sends nothing. A write or barrier that
// fails ends the activation, which resigns the key; the next message
// acquires it again and adopts what the replicas hold.

// The formats of a stored record; a newer one is refused. 2 adds the
// answers kept for keyed asks (see continuity.go) after the timers; 3
// lets them hold requests pending (whose body is the attempt) and lost,
// which only strict durability makes; 4 holds the same in about half
// the bytes (appendRetained), which every write of a keyed ask's record
// pays at each replica; 5 is 4 holding up to maxRetainedHeld answers, not
// maxRetained (a binary that reads no newer than 4 refuses it, its error
// naming the format); 6 is 5 followed by what the key's pages of kept
// answers hold (see pages.go). A record without kept answers is written
// in format 1, one with up to maxRetained of them in format 4, one whose
// key has pages in format 6, one with more than maxRetained (deferred
// replies still open, which no page takes) and no pages in format 5; 2
// and 3 are read, no longer written.
const (
	recordVersion        = 1
	recordVersionKept    = 2
	recordVersionPending = 3
	recordVersionCompact = 4
	recordVersionHeld    = 5
	recordVersionPaged   = 6
	recordVersionNewest  = recordVersionPaged
)

// storedTimer is a timer kept in a key's record: its name, when it fires
// next (wall clock), its period (0: once) and its message.
type storedTimer struct {
	name   string
	due    time.Time
	period time.Duration
	msg    string // the message's registered type name
	body   []byte
}

// committer is a Context whose kind is durable: the output gate that Tell
// and Ask reach through the Base of the context they are given.
type committer interface{ commitState() error }

// outputGated is a handler's context: its Base.
type outputGated interface{ gateOutput() error }

// gateOutput commits the state of the run whose Base b is, before an
// output leaves: nothing for a kind that keeps no state.
func (b *Base) gateOutput() error {
	if b.gate == nil {
		return nil
	}
	return b.gate.commitState()
}

// gateDerived is Base.gateOutput of the handler whose Context ctx is
// derived from, if any.
func gateDerived(ctx context.Context) error {
	if g, ok := ctx.Value(handlerKey{}).(outputGated); ok {
		return g.gateOutput()
	}
	return nil
}

// gateOutputOf is Base.gateOutput of the handler whose context ctx is or is
// derived from, if any: for an Ask. A handler's own Context is found
// without a Value lookup.
func gateOutputOf(ctx context.Context) error {
	if g, ok := ctx.(outputGated); ok {
		return g.gateOutput()
	}
	return gateDerived(ctx)
}

// commitState implements committer: the state the message changed, or
// the ownership of an unchanged one, meets the write level.
func (c *Context[S, M, C]) commitState() error { return c.commit(true) }

// commit writes what the message being handled changed (its state and
// timers, or the key's deletion); with barrier, a message that changed
// nothing confirms once that this node still owns the key. Once failed it
// fails again: the activation is lost. Outputs from goroutines the
// handler started (asks through a context derived from its Context) call
// it concurrently: one commit runs at a time, so the store sees one
// write of the key at a time, in order.
func (c *Context[S, M, C]) commit(barrier bool) error {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	return c.commitLocked(barrier)
}

// commitLocked is commit with c.gateMu held.
func (c *Context[S, M, C]) commitLocked(barrier bool) error {
	cl := c.cell
	if c.lost == nil {
		// A write that went on without the handler and failed: the
		// activation is lost, as if this commit had failed.
		c.lost = cl.commits().failed()
	}
	if c.lost != nil {
		return c.lost
	}
	k := cl.k
	st := k.h.Store
	var err error
	switch {
	case c.deleted:
		if c.erased {
			return nil
		}
		ctx, cancel := c.storeCtx()
		err = st.Delete(ctx, k.def.Name, cl.key)
		cancel()
		// Then its pages: erased first, a delete that failed after them
		// would have dropped answers of a key that lives on. Pages left
		// by a delete cut short are erased by the key's next load.
		if x := cl.extIfAny(); err == nil && x != nil {
			err = cl.erasePages(c, x)
		}
		c.erased = err == nil
		if c.erased {
			cl.forgetKept()
		}
	case c.dirty || cl.recordChanged():
		x := cl.extIfAny()
		limit := st.MaxValue(k.def.Name, cl.key)
		var rec []byte
		rec, err = cl.record()
		if err == nil && x != nil && cl.pagesDue(x) {
			if err = cl.pageOut(c, x, len(rec), limit); err == nil {
				rec, err = cl.record()
			}
		}
		if err == nil && len(rec) > limit {
			err = fmt.Errorf("%w: state of %s/%s: %d bytes, limit %d", ErrMessageTooLarge, k.def.Name, cl.key, len(rec), limit)
		}
		if err == nil && x != nil && !x.pagesFit(len(rec), limit) {
			// The pages give way to the state; the record then says so.
			if err = cl.fitPages(c, x, len(rec), limit); err == nil {
				rec, err = cl.record()
			}
		}
		if err == nil {
			ctx, cancel := c.storeCtx()
			err = st.Write(ctx, k.def.Name, cl.key, rec)
			cancel()
		}
		if err == nil {
			c.dirty, c.confirmed = false, true
			cl.noteKept()
		} else {
			cl.unsaved()
		}
	case barrier && !c.confirmed:
		ctx, cancel := c.storeCtx()
		_, _, err = st.Read(ctx, k.def.Name, cl.key)
		cancel()
		c.confirmed = err == nil
	}
	if err != nil {
		c.lost = fmt.Errorf("troupe: %s/%s: state not stored: %w", k.def.Name, cl.key, err)
		return c.lost
	}
	return nil
}

// storeCtx bounds a store call of the message being handled: by its
// asker's deadline, else by the kind's ask timeout, and by Close's. It
// ends a little before an asker's deadline, so that the asker hears
// ErrUnavailable rather than its own timeout.
func (c *Context[S, M, C]) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithDeadline(c.cell.k.h.HardCtx(), c.storeDeadline())
}

// storeDeadline is when a store call of the message being handled gives
// up (see storeCtx).
func (c *Context[S, M, C]) storeDeadline() time.Time {
	dl, ok := time.Time{}, false
	if c.slot != nil {
		dl, ok = c.slot.deadline()
	}
	if ok {
		return dl.Add(-min(time.Until(dl)/10, answerMargin))
	}
	return time.Now().Add(c.cell.k.ask)
}

// answerMargin bounds what a store call leaves of its asker's time for
// the answer to be made and travel: the rest of the handler, the
// settling, the hop back and the asker's wake-up, which on a loaded
// machine (two cores, the race detector) took more than 50 ms.
const answerMargin = 250 * time.Millisecond

// settle ends a message of a durable kind: it commits what the message
// changed and fails an unanswered ask if that failed; a lost or deleted
// key's activation ends (resigning it). The deferred replies held while
// the message ran leave once the commit succeeded, or fail with its
// error. err is the handler's error, returned as it is unless the
// activation could not start.
func (c *cell[S, M, C]) settle(ctx *Context[S, M, C], e *envelope[M], err error) error {
	s := e.ask()
	if serr := ctx.startErr; serr != nil {
		ctx.startErr = nil
		if s != nil {
			s.fail(serr)
		}
		c.releaseHeld(serr)
		if ctx.unreached {
			// The store could not be reached (acquire or read): no crash
			// and no backoff. The message fails, and the next one tries
			// again, within its own deadline.
			ctx.unreached = false
			c.k.h.Emit(host.Event{Kind: host.MessageDropped, Type: c.k.def.Name, Key: c.key, Reason: "state unavailable", Err: serr})
			return nil
		}
		return serr
	}
	if !c.started {
		c.releaseHeld(nil)
		return err // ended by the handler (a failure restarts it)
	}
	// An answer still to leave (a declared error, a failure, a held
	// deferred reply) is an output like a reply given with Respond: it
	// first confirms that this node still owns the key.
	answer := s != nil && !s.settled()
	if err == nil && !answer && !ctx.release && !ctx.deleted {
		if ok, cerr := c.settleAsync(ctx); ok {
			ctx.dirty, ctx.confirmed = false, false
			if cerr != nil {
				ctx.lost = nil
				c.warn("troupe: actor state not stored; the activation ends", s, cerr)
				c.end("unavailable")
			}
			return nil
		}
	}
	// The hold ends with the commit, under its lock: a deferred reply of
	// a keyed ask given after it would leave without its kept answer
	// written (see holdKept).
	ctx.gateMu.Lock()
	cerr := ctx.commitLocked(answer || c.holds())
	held := c.takeHeld()
	ctx.gateMu.Unlock()
	if cerr != nil && s != nil {
		s.fail(cerr)
	}
	releaseReplies(held, cerr)
	deleted := ctx.deleted
	ctx.dirty, ctx.confirmed, ctx.deleted, ctx.erased, ctx.lost = false, false, false, false, nil
	switch {
	case cerr != nil:
		c.warn("troupe: actor state not stored; the activation ends", s, cerr)
		ctx.release = false
		c.end("unavailable")
	case deleted:
		ctx.release = false
		c.end("deleted")
	}
	return err
}

// asyncStore is a host.Store whose writes can go on without their
// caller. WriteAsync queues value as the key's state, after every write
// of the key queued before it, and returns; done is then called exactly
// once, from another goroutine, with what Write would have returned
// (nil once the write and every earlier one met the key's level). done
// must not block. A write refused at once returns the error and never
// calls done. The store keeps value: the caller must not change it
// after the call (record returns a fresh one for each write).
type asyncStore interface {
	WriteAsync(typ, key string, value []byte, done func(error)) error
}

// maxAsyncWrites bounds an activation's writes in flight: a handler that
// writes faster than its replicas acknowledge waits for its commit
// beyond it, as without an asyncStore.
const maxAsyncWrites = 64

// asyncCommits tracks the writes of one activation that went on without
// its handler: how many are in flight, and the first that failed, which
// loses the activation (its next commit fails and ends it). One timer
// serves the deadlines of all of them, set for the earliest: a timer per
// write cost every write its allocation and two operations on the
// runtime's timer heap.
type asyncCommits struct {
	mu       sync.Mutex
	inFlight int
	err      error
	// writes are the writes in flight not yet settled; timer fires at
	// timerAt, the earliest of their deadlines when it was set (zero:
	// not set).
	writes  []*asyncWrite
	timer   *time.Timer
	timerAt time.Time
}

// watch adds w to the writes whose deadlines the timer serves.
func (a *asyncCommits) watch(w *asyncWrite) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes = append(a.writes, w)
	a.armLocked(w.deadline)
}

// armLocked sets the timer for at unless it is set for sooner.
func (a *asyncCommits) armLocked(at time.Time) {
	if !a.timerAt.IsZero() && !at.Before(a.timerAt) {
		return
	}
	a.timerAt = at
	if a.timer == nil {
		a.timer = time.AfterFunc(time.Until(at), a.expire)
		return
	}
	a.timer.Reset(time.Until(at))
}

// unwatchLocked removes w, settled, from the writes the timer serves.
// The timer stays set while writes are left (at worst it fires once with
// nothing due), and stops with the last, so that an activation with
// nothing in flight leaves no timer behind.
func (a *asyncCommits) unwatchLocked(w *asyncWrite) {
	// Writes settle in order, so w is almost always the first.
	if i := slices.Index(a.writes, w); i >= 0 {
		a.writes = slices.Delete(a.writes, i, i+1)
	}
	if len(a.writes) == 0 && a.timer != nil && !a.timerAt.IsZero() {
		a.timer.Stop()
		a.timerAt = time.Time{}
	}
}

// expire is the timer: the writes past their deadline expire, and the
// timer is set again for the earliest deadline left.
func (a *asyncCommits) expire() {
	now := time.Now()
	var due []*asyncWrite
	a.mu.Lock()
	a.timerAt = time.Time{}
	var next time.Time
	a.writes = slices.DeleteFunc(a.writes, func(w *asyncWrite) bool {
		if !w.deadline.After(now) {
			due = append(due, w)
			return true
		}
		if next.IsZero() || w.deadline.Before(next) {
			next = w.deadline
		}
		return false
	})
	if !next.IsZero() {
		a.armLocked(next)
	}
	a.mu.Unlock()
	for _, w := range due {
		w.expired()
	}
}

// failed returns why the activation is lost, if a write of it failed; a
// nil a has no writes.
func (a *asyncCommits) failed() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// busy reports whether a write is in flight.
func (a *asyncCommits) busy() bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inFlight > 0
}

// asyncWrite is one write in flight: the replies it holds leave once it
// met the level, or fail at its deadline or with its error.
type asyncWrite struct {
	a        *asyncCommits
	held     []heldReply
	deadline time.Time
	settled  atomic.Bool // the replies were released or failed
	// store, typ and key name the write's key, for errors and to resign
	// it at the deadline; kept apart, an error's name and the resign are
	// only made when needed.
	store    host.Store
	typ, key string
}

// what names the write's key in errors: type/key.
func (w *asyncWrite) what() string { return w.typ + "/" + w.key }

// stored is the store's answer.
func (w *asyncWrite) stored(err error) {
	if err != nil {
		err = fmt.Errorf("troupe: %s: state not stored: %w", w.what(), err)
	}
	w.a.mu.Lock()
	w.a.inFlight--
	if err != nil && w.a.err == nil {
		w.a.err = err
	}
	w.a.unwatchLocked(w)
	w.a.mu.Unlock()
	if w.settled.CompareAndSwap(false, true) {
		releaseReplies(w.held, err)
	}
}

// expired is the write's deadline: its replies fail, the activation is
// lost and the key resigned, which fails the write (and those after it)
// in the store, so that the next owner adopts what a quorum holds.
func (w *asyncWrite) expired() {
	if !w.settled.CompareAndSwap(false, true) {
		return
	}
	err := fmt.Errorf("troupe: %s: state not stored: %w: the write level was not met before the deadline (the write may or may not have happened)", w.what(), ErrUnavailable)
	w.a.mu.Lock()
	if w.a.err == nil {
		w.a.err = err
	}
	w.a.mu.Unlock()
	w.store.Resign(w.typ, w.key)
	releaseReplies(w.held, err)
}

// settleAsync ends a message whose change can be written without
// blocking: the record goes to the store, and the replies the message
// holds leave once it met the level. ok false: the message must commit
// as usual (a store that cannot, nothing or too much to write, too many
// writes in flight). A write refused at once is cerr, with the held
// replies failed: the activation ends.
func (c *cell[S, M, C]) settleAsync(ctx *Context[S, M, C]) (ok bool, cerr error) {
	k := c.k
	st, can := k.h.Store.(asyncStore)
	if !can {
		return false, nil
	}
	ctx.gateMu.Lock()
	defer ctx.gateMu.Unlock()
	a := c.commits()
	if ctx.lost != nil || a == nil || !(ctx.dirty || c.recordChanged()) {
		return false, nil
	}
	a.mu.Lock()
	room := a.err == nil && a.inFlight < maxAsyncWrites
	if room {
		a.inFlight++
	}
	a.mu.Unlock()
	if !room {
		return false, nil
	}
	x := c.extIfAny()
	if x != nil && c.pagesDue(x) {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
		return false, nil // pages are written first, by the usual commit
	}
	rec, err := c.record()
	if limit := k.h.Store.MaxValue(k.def.Name, c.key); err == nil && len(rec) > limit {
		err = ErrMessageTooLarge
	} else if err == nil && x != nil && !x.pagesFit(len(rec), limit) {
		err = ErrMessageTooLarge // the usual commit makes room
	}
	if err != nil {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
		c.unsaved()       // made, not written
		return false, nil // the usual commit fails it, with the same error
	}
	c.mu.Lock()
	var held []heldReply
	if x := c.x; x != nil {
		held, x.held, x.handling = x.held, nil, false
	}
	c.mu.Unlock()
	w := &asyncWrite{a: a, held: held, deadline: ctx.storeDeadline(), store: k.h.Store, typ: k.def.Name, key: c.key}
	a.watch(w)
	if err := st.WriteAsync(k.def.Name, c.key, rec, w.stored); err != nil {
		a.mu.Lock()
		a.unwatchLocked(w)
		a.inFlight--
		a.mu.Unlock()
		w.settled.Store(true)
		cerr = fmt.Errorf("troupe: %s: state not stored: %w", w.what(), err)
		releaseReplies(held, cerr)
		return true, cerr
	}
	c.noteKept() // a hint: a write that fails loses the activation, which notes again when loaded
	return true, nil
}

// commits returns the tracker of the activation's writes in flight; nil
// when the store cannot write without blocking or no activation runs.
func (c *cell[S, M, C]) commits() *asyncCommits {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.x == nil {
		return nil
	}
	return c.x.commits
}

// replyWaits reports whether a reply given now can wait for the
// message's commit instead of committing first: the message changed the
// state and the store writes without blocking its caller.
func (c *Context[S, M, C]) replyWaits() bool {
	if c.gate == nil {
		return false
	}
	if _, ok := c.cell.k.h.Store.(asyncStore); !ok {
		return false
	}
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	return c.dirty && !c.deleted && c.lost == nil
}

// holdReply holds answer, the reply to the message being handled, until
// the message's commit (see replyWaits); it gives it now, after the
// commit, when the cell holds no replies.
func (c *Context[S, M, C]) holdReply(answer func()) {
	s := c.slot
	s.setDeferred() // answered: not ErrNoReply
	fail := func(err error) bool { s.fail(err); return true }
	if c.cell.holdReply(heldReply{answer: answer, fail: fail}) {
		return
	}
	if err := c.Base.gateOutput(); err != nil {
		s.fail(err)
		return
	}
	answer()
}

// releaseReplies gives held, or with err fails them with it.
func releaseReplies(held []heldReply, err error) {
	for _, r := range held {
		if err != nil {
			r.fail(err)
		} else {
			r.answer()
		}
	}
}

// heldReply is a deferred reply given while its durable cell handled a
// message: answer gives it, fail replaces it with an error.
type heldReply struct {
	answer func()
	fail   func(error) bool
}

// handling marks the start of a durable message, which ctx handles:
// deferred replies given until settle wait for its commit.
func (c *cell[S, M, C]) handling(ctx *Context[S, M, C]) {
	c.mu.Lock()
	x := c.ext()
	x.handling, x.gate = true, &ctx.gateMu
	c.mu.Unlock()
}

// holdReply implements replyHolder: while the cell handles a message, r
// waits for its commit (whichever goroutine resolved it: the state it
// was taken from may be the message's, not yet stored).
func (c *cell[S, M, C]) holdReply(r heldReply) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.x == nil || !c.x.handling {
		return false
	}
	c.x.held = append(c.x.held, r)
	return true
}

// holds reports whether a deferred reply waits for the message's commit.
func (c *cell[S, M, C]) holds() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.x != nil && len(c.x.held) > 0
}

// releaseHeld ends the message's hold: its held replies leave, or with
// err fail with it.
func (c *cell[S, M, C]) releaseHeld(err error) {
	releaseReplies(c.takeHeld(), err)
}

// takeHeld ends the message's hold and returns its held replies.
func (c *cell[S, M, C]) takeHeld() []heldReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	var held []heldReply
	if x := c.x; x != nil {
		held, x.held, x.handling = x.held, nil, false
	}
	return held
}

// load acquires the key of a starting activation and reads its stored
// state and timers; with nothing stored, the state is WithInit's. An
// acquisition that the store says was superseded before the read
// confirmed it is made again (see host.Store.Retry). A
// record whose state or a timer's message does not decode fails the
// activation (as StateFailed makes the error) and stays as it is: an
// activation that started without the timer would store its record
// without it.
func (c *cell[S, M, C]) load(ctx *Context[S, M, C]) (S, []liveTimer[M], error) {
	var zero S
	k := c.k
	st := k.h.Store
	sctx, cancel := ctx.storeCtx()
	defer cancel()
	n := k.def.Replicas
	if k.def.Pinned || n < 1 {
		n = 1
	}
	var v []byte
	var ok bool
	var aside map[string][]byte
	for attempt := 1; ; attempt++ {
		var err error
		if err = st.Acquire(sctx, k.def.Name, c.key, n, k.def.Level, k.def.Pinned); err != nil {
			err = fmt.Errorf("troupe: %s/%s: acquire: %w", k.def.Name, c.key, err)
		} else if v, ok, aside, err = st.ReadAll(sctx, k.def.Name, c.key); err != nil {
			err = fmt.Errorf("troupe: %s/%s: read: %w", k.def.Name, c.key, err)
		}
		if err == nil {
			break
		}
		st.Resign(k.def.Name, c.key)
		// Nothing ran on the key yet: an acquisition superseded meanwhile
		// is tried again, unseen by the message's sender.
		if wait, again := st.Retry(k.def.Name, c.key, err, attempt); again && sleepCtx(sctx, wait) {
			continue
		}
		ctx.unreached = true
		return zero, nil, err
	}
	ctx.confirmed = true
	if _, async := st.(asyncStore); async {
		c.mu.Lock()
		c.ext().commits = &asyncCommits{}
		c.mu.Unlock()
	}
	pages, err := decodePages(aside)
	if err != nil {
		err = fmt.Errorf("kept answers: %w", err)
	}
	if !ok && err == nil && pages != nil {
		// Pages without a record are those of a delete cut short (a
		// record is written before any page): the delete ends now.
		c.mu.Lock()
		x := c.ext()
		c.mu.Unlock()
		ctx.gateMu.Lock()
		x.pages = pages
		err = c.erasePages(ctx, x)
		ctx.gateMu.Unlock()
		if err != nil {
			st.Resign(k.def.Name, c.key)
			ctx.unreached = true
			return zero, nil, fmt.Errorf("troupe: %s/%s: erasing the pages of a deleted key: %w", k.def.Name, c.key, err)
		}
		pages = nil
	}
	if !ok && err == nil {
		c.setRetained(ctx, nil, pages)
		if k.def.Init != nil {
			return k.def.Init(c.key), nil, nil
		}
		return zero, nil, nil
	}
	var s S
	var stored []storedTimer
	var kept []retained
	if err == nil {
		s, stored, kept, err = decodeRecord[S](k.h, v)
	}
	var timers []liveTimer[M]
	if err == nil {
		timers, err = c.decodeTimers(stored)
	}
	if err == nil {
		c.setRetained(ctx, kept, pages)
	}
	if err != nil {
		st.Resign(k.def.Name, c.key)
		if f := k.def.StateFailed; f != nil {
			return zero, nil, f(c.key, err)
		}
		return zero, nil, fmt.Errorf("troupe: %s/%s: stored state: %w", k.def.Name, c.key, err)
	}
	return s, timers, nil
}

// record encodes the activation's state and timers as the key's record:
// a version byte, the state (msgpack), then each timer, then (formats 4
// and 5) the answers kept for keyed asks.
func (c *cell[S, M, C]) record() ([]byte, error) {
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	state, err := codec.AppendReply(buf, any(c.state))
	if err != nil {
		return nil, fmt.Errorf("encode state %T: %w", c.state, err)
	}
	var kept []retained
	var pages *keptPages
	c.mu.Lock()
	if c.x != nil {
		kept, pages = c.x.retained, c.x.pages // under the Context's gateMu, held by every commit
	}
	c.mu.Unlock()
	if pages != nil && pages.answers == 0 {
		pages = nil
	}
	size := len(state) + 16
	if len(kept) > 0 {
		size += retainedLen(kept)
	}
	out := make([]byte, 0, size)
	switch {
	case pages != nil:
		out = append(out, recordVersionPaged)
	case len(kept) > maxRetained:
		out = append(out, recordVersionHeld)
	case len(kept) > 0:
		// Format 4 holds them: a binary that reads no newer reads it.
		out = append(out, recordVersionCompact)
	default:
		out = append(out, recordVersion)
	}
	out = binary.AppendUvarint(out, uint64(len(state)))
	out = append(out, state...)
	buf.SetBytes(state[:0])
	timers := c.storedTimers()
	out = binary.AppendUvarint(out, uint64(len(timers)))
	for _, t := range timers {
		mb := codec.GetBuffer()
		name, err := c.k.def.Codec.EncodeTo(mb, any(t.m))
		if err != nil {
			codec.PutBuffer(mb)
			return nil, fmt.Errorf("encode timer %q: %w", t.name, err)
		}
		out = appendString(out, t.name)
		out = binary.AppendVarint(out, t.due.UnixNano())
		out = binary.AppendVarint(out, int64(t.period))
		out = appendString(out, name)
		out = binary.AppendUvarint(out, uint64(len(mb.Bytes())))
		out = append(out, mb.Bytes()...)
		codec.PutBuffer(mb)
	}
	if len(kept) > 0 || pages != nil {
		out = appendRetained(out, kept)
	}
	if pages != nil {
		out = appendPaged(out, pages)
	}
	if extra := cap(out) - len(out); extra > 256 && extra > len(out)/8 {
		// The store keeps the record as it is given (WriteAsync), until
		// the key's next write: not with much room that timers grew
		// into, or the estimate of answers written the first time, left
		// over (a few bytes past a small record are not worth a copy).
		out = slices.Clone(out)
	}
	return out, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errRecord reports a stored record that is not one this binary wrote.
var errRecord = errors.New("troupe: malformed state record")

// decodeRecord decodes a record that record encoded.
func decodeRecord[S any](h *host.Host, b []byte) (S, []storedTimer, []retained, error) {
	s, timers, kept, _, err := decodeRecordPaged[S](h, b)
	return s, timers, kept, err
}

// pagesSaid is what a record says of its key's pages: how many answers
// they hold, and when the next page goes by its age (see appendPaged).
type pagesSaid struct {
	answers uint64
	due     int64
}

// decodeRecordPaged is decodeRecord, with what the record says of its
// key's pages.
func decodeRecordPaged[S any](h *host.Host, b []byte) (S, []storedTimer, []retained, pagesSaid, error) {
	var s S
	var paged pagesSaid
	if len(b) == 0 {
		return s, nil, nil, paged, fmt.Errorf("%w: empty", errRecord)
	}
	if b[0] < recordVersion || b[0] > recordVersionNewest {
		return s, nil, nil, paged, fmt.Errorf("%w: format %d, this binary reads %d to %d", errRecord, b[0], recordVersion, recordVersionNewest)
	}
	r := recordReader{b: b[1:]}
	state := r.bytes()
	n := r.uvarint()
	if r.err != nil {
		return s, nil, nil, paged, r.err
	}
	if err := codec.DecodeState(h, state, &s); err != nil {
		return s, nil, nil, paged, fmt.Errorf("decode state as %T: %w", s, err)
	}
	var timers []storedTimer
	for i := uint64(0); i < n && r.err == nil; i++ {
		var t storedTimer
		t.name = string(r.bytes())
		t.due = time.Unix(0, r.varint())
		t.period = time.Duration(r.varint())
		t.msg = string(r.bytes())
		t.body = r.bytes()
		timers = append(timers, t)
	}
	var kept []retained
	if b[0] >= recordVersionKept {
		kept = r.retained(b[0])
	}
	if b[0] >= recordVersionPaged {
		paged.answers, paged.due = r.paged()
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errRecord, len(r.b))
	}
	return s, timers, kept, paged, r.err
}

type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad length", errRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// fixed reads n bytes.
func (r *recordReader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated", errRecord)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad integer", errRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: truncated", errRecord)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// liveTimer is a timer of the activation as record stores it.
type liveTimer[M any] struct {
	name   string
	due    time.Time
	period time.Duration
	m      M
}

// storedTimers returns the activation's live timers, for the record
// being made, which holds what changed besides the state.
func (c *cell[S, M, C]) storedTimers() []liveTimer[M] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.x == nil {
		return nil
	}
	c.x.recordChanged = false
	ts := make([]liveTimer[M], 0, len(c.x.timers))
	for name, e := range c.x.timers {
		e.saved = true
		ts = append(ts, liveTimer[M]{name: name, due: e.due, period: e.period, m: e.msg})
	}
	return ts
}

// unsaved undoes what making a record that will not be written did:
// the record changed still, and the timers are not in the store as they
// stand (see timerEntry.saved).
func (c *cell[S, M, C]) unsaved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.x == nil {
		return
	}
	c.x.recordChanged = true
	for _, e := range c.x.timers {
		e.saved = false
	}
}

// recordChanged reports whether the record changed besides the state
// (see extra.recordChanged) since it was last written.
func (c *cell[S, M, C]) recordChanged() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.x != nil && c.x.recordChanged
}

// decodeTimers decodes the messages of a record's timers.
func (c *cell[S, M, C]) decodeTimers(stored []storedTimer) ([]liveTimer[M], error) {
	var timers []liveTimer[M]
	for _, t := range stored {
		m, err := codec.DecodeMessage[M](c.k.def.Codec, c.k.h, t.msg, t.body)
		if err != nil {
			return nil, fmt.Errorf("timer %q: %w", t.name, err)
		}
		timers = append(timers, liveTimer[M]{name: t.name, due: t.due, period: t.period, m: m})
	}
	return timers, nil
}

// rearm sets again the timers a loaded record holds, with what is left
// of their time (none: they fire at once).
func (c *cell[S, M, C]) rearm(timers []liveTimer[M]) {
	now := time.Now()
	for _, t := range timers {
		c.armTimer(t.name, max(t.due.Sub(now), 0), t.period, t.m, true) // as loaded: saved
	}
}

// sleepCtx waits d, reporting false if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
