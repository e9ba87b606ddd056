package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// Tell sends msg to the actor without waiting for it to be handled. Under
// the Refuse overflow policy it never blocks; under Wait it waits for
// mailbox room until ctx ends. Tell is a method so that any message type
// implementing M is accepted as it is.
func (r Ref[M]) Tell(ctx context.Context, msg M) error {
	if r.to == nil {
		return r.tellUnbound(ctx, msg)
	}
	// What the handler telling changed is stored first, whether ctx is
	// its Context or derived from it; in a system that stores no state
	// the lookup of the latter is skipped: it would cost every plain
	// tell about 6 ns, a tenth of its cost.
	var tr *host.Trace // the trace context the tell carries
	if g, ok := ctx.(handlerRun); ok {
		if err := g.gateOutput(); err != nil {
			return r.tellFailed(err)
		}
		tr = g.handlerTrace()
	} else {
		if r.to.stores {
			if err := gateDerived(ctx); err != nil {
				return r.tellFailed(err)
			}
		}
		if mayCarryTrace(ctx) {
			var err error
			if tr, err = traceOf(ctx); err != nil {
				return r.tellFailed(err)
			}
		}
	}
	if tr != nil {
		return r.tellTraced(ctx, msg, tr)
	}
	// A failure is counted here, a success where the tell is taken (see
	// host.TypeMeter): a tell that succeeds pays one test of err.
	if err := r.to.sink.tell(ctx, r.key, r.w, msg); err != nil {
		return r.tellFailed(err)
	}
	return nil
}

// tellTraced is Tell for a tell that carries the trace context tr: off
// the fast path, which has no room for it.
func (r Ref[M]) tellTraced(ctx context.Context, msg M, tr *host.Trace) error {
	hk, tok := r.hashes()
	if err := r.to.sink.deliver(ctx, r.key, hk, tok, msg, nil, tr); err != nil {
		return r.tellFailed(err)
	}
	return nil
}

// tellFailed counts err, a tell's failure, if the system has metrics, and
// returns it.
func (r Ref[M]) tellFailed(err error) error {
	if r.to.met != nil {
		r.to.met.Tells[tellOutcome(err)].Add(1)
	}
	return err
}

// tellUnbound is Tell for a ref bound to no system.
func (r Ref[M]) tellUnbound(ctx context.Context, msg M) error {
	r, err := r.resolve(ctx)
	if err != nil {
		return err
	}
	return r.Tell(ctx, msg)
}

// Ask sends the request m to ref and waits for the handler's reply. When ctx
// has no deadline, the definition's ask timeout applies. If ctx ends first,
// the request is dropped if still queued, or the handler's context is
// cancelled if it is running, and the error wraps ctx's error (or
// context.DeadlineExceeded for the ask timeout). A handler that fails gives
// an error wrapping ErrActorFailed.
//
// Ask returns at its deadline (or when ctx ends) whatever the handler
// does: the handler never runs on the calling goroutine, so one that
// ignores its context delays only its actor, and its late reply is
// dropped.
func Ask[M, R any](ctx context.Context, ref Ref[M], m M) (R, error) {
	ref, err := ref.resolve(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	if met := ref.to.met; met != nil {
		return askCounted[M, R](ctx, ref, m, met)
	}
	return ask[M, R](ctx, ref, m, nil)
}

// askCounted is Ask for a system with metrics: it counts the outcome and
// times the ask.
func askCounted[M, R any](ctx context.Context, ref Ref[M], m M, met *host.TypeMeter) (R, error) {
	var start time.Time
	v, err := ask[M, R](ctx, ref, m, &start)
	var took time.Duration
	if !start.IsZero() { // zero: refused before it waited
		took = time.Since(start)
	}
	met.ObserveAsk(took, askResult(err, ref.to.sink))
	return v, err
}

// ask is Ask for a bound ref. When start is not nil, it is set to the
// time the ask began waiting: the clock read that makes its deadline,
// which a clock read costs as much as the counts (see host.TypeMeter).
func ask[M, R any](ctx context.Context, ref Ref[M], m M, start *time.Time) (R, error) {
	var zero R
	to := ref.to.sink
	hk, tok := ref.hashes()
	h := to.host()
	rid, idem, err := requestOf(ctx, h)
	if err != nil {
		return zero, err
	}
	tr, err := sendTrace(ctx)
	if err != nil {
		return zero, err
	}
	if idem != "" && !ref.to.keeps {
		return zero, askFailed(fmt.Errorf("%w: %s keeps no state", ErrIdempotencyUnsupported, ref.to.typ), rid, nil)
	}
	var chain []string
	if c, ok := ctx.Value(chainKey{}).([]string); ok {
		// Asked from a handler: what it changed is stored first.
		if err := gateOutputOf(ctx); err != nil {
			return zero, askFailed(err, rid, nil)
		}
		if inChain(c, ref.to.typ, ref.key) {
			return zero, askFailed(&CycleError{Chain: append(slices.Clip(c), ref.String())}, rid, nil)
		}
		chain = c
	}
	h.AsksOut.Add(1)
	defer h.AsksOut.Add(-1)
	waits := to.waits()
	var done chan struct{}
	if waits != nil {
		done = waits.doneChan()
	} else {
		done = make(chan struct{}, 1)
	}
	s := newSlot[R](ctx, done)
	s.chain, s.rid, s.opt = chain, rid, withOptions(idem, tr)
	listed := false // s waits in the ask timeout's list
	timed := false  // the deadline needs a timer of its own
	if s.dl.IsZero() {
		now := time.Now()
		s.dl = now.Add(to.askTimeout())
		listed = waits != nil
		timed = !listed
		if start != nil {
			*start = now
		}
	} else {
		if chain != nil {
			timed = endsLate(ctx, s.dl)
		}
		if start != nil {
			*start = time.Now()
		}
	}
	if err := to.deliver(ctx, ref.key, hk, tok, m, s, tr); err != nil {
		return zero, askFailed(err, rid, nil)
	}
	if listed && !waits.add(&s.wait, s, s.dl) {
		// Its delivery waited (for mailbox room): asks listed meanwhile
		// end later than it does.
		listed, timed = false, true
	}
	v, took, err := awaitReply(ctx, h, s, timed, ref)
	if listed {
		waits.remove(&s.wait)
	}
	if took && waits != nil {
		waits.putChan(done)
	}
	if err != nil {
		return v, askFailed(err, rid, to)
	}
	return v, nil
}

// endsLate reports whether ctx, made inside a handler, may end after its
// deadline dl: the handler's Context reports its asker's deadline but
// ends when that asker gives up, which for an asker on another member is
// when its cancel arrives. A context derived from it with an earlier
// deadline ends at its own.
func endsLate(ctx context.Context, dl time.Time) bool {
	hc, ok := ctx.Value(handlerKey{}).(context.Context)
	if !ok {
		return false
	}
	hdl, ok := hc.Deadline()
	return ok && !dl.Before(hdl)
}

// handlerKey is the context key under which a handler's Context answers
// with itself.
type handlerKey struct{}

// awaitReply waits for s's outcome until ctx ends, its ask timeout
// expires s (see askWaits) or, if timed, s's deadline passes. took
// reports that it took the token of s.done, which is then empty for good.
//
// The asker parks at once: polling the channel first would spare the
// reply's reader the wake-up of a thread for an idle processor, but it
// takes CPU the serving member needs (docs/architecture.md).
func awaitReply[M, R any](ctx context.Context, h *host.Host, s *slot[R], timed bool, ref Ref[M]) (v R, took bool, err error) {
	var zero R
	var cause error
	if quit := ctx.Done(); quit == nil && !timed {
		<-s.done // nothing else can end the wait: a receive costs less than a select
	} else {
		var timeout <-chan time.Time
		if timed {
			t := h.Timer(time.Until(s.dl))
			defer h.PutTimer(t)
			timeout = t.C
		}
		select {
		case <-s.done:
		case <-quit:
			cause = ctx.Err()
		case <-timeout:
			cause = context.DeadlineExceeded
		}
	}
	if cause == nil {
		if !s.expired { // read after the token: set before it was sent
			return s.val, true, s.err
		}
		return zero, true, &askError{ref: ref.String(), cause: context.DeadlineExceeded}
	}
	if !s.cancel() {
		<-s.done
		return s.val, true, s.err
	}
	// Cancelled here, or expired (whose token may still be on its way):
	// the channel is not reused.
	return zero, false, &askError{ref: ref.String(), cause: cause}
}

// askError wraps the reason an asker stopped waiting.
type askError struct {
	ref   string
	cause error
}

func (e *askError) Error() string { return fmt.Sprintf("troupe: ask %s: %v", e.ref, e.cause) }
func (e *askError) Unwrap() error { return e.cause }

// Respond answers the ask being handled with r. Respond after a Tell
// (nobody waits) does nothing; a second Respond to the same ask is
// ignored. It reports false when the request being handled expects another reply
// type: the caller, which knows the request, makes the error (taking the
// request here would box it, an allocation per reply).
func Respond[S, M, C, R any](c *Context[S, M, C], r R) bool {
	if c.slot == nil {
		return true
	}
	if c.keyed != nil {
		switch c.slot.(type) {
		case *slot[R], *slot[any]:
			c.retainReply(r)
		}
	}
	if c.replyWaits() {
		// The message's write goes on without the handler; the reply
		// leaves once it met the level.
		switch s := c.slot.(type) {
		case *slot[R]:
			k, key := c.cell.k, c.cell.key
			c.holdReply(func() { completeHere(s, k, key, r) })
		case *slot[any]:
			c.holdReply(func() { s.complete(r, nil) })
		default:
			return false
		}
		return true
	}
	if err := c.Base.gateOutput(); err != nil {
		c.slot.fail(err) // the reply would follow a state not stored
		return true
	}
	switch s := c.slot.(type) {
	case *slot[R]:
		completeHere(s, c.cell.k, c.cell.key, r)
	case *slot[any]: // an ask from another node: the reply is encoded
		s.complete(r, nil)
	default:
		return false
	}
	return true
}

// Deferred is a reply that a handler gives later, after its message has
// returned: from a piped answer, a timer or another goroutine.
type Deferred[R any] struct {
	s    *slot[R]
	a    *slot[any] // instead of s, for an ask from another node
	k    failer
	key  string
	hold replyHolder // a durable cell's: holds the reply until its state is stored; nil otherwise
	// kept is the keyed ask whose reply this is, whose answer is kept
	// before it leaves; nil for an ask without an idempotency key.
	kept *deferredKept
}

// replyHolder is a durable cell: while it handles a message, a deferred
// reply waits for that message's commit (see cell.holdReply); the reply
// of a keyed ask waits for the commit that keeps its answer (see
// cell.holdKept).
type replyHolder interface {
	holdReply(r heldReply) bool
	holdKept(dk *deferredKept, a retained, r heldReply) bool
}

// Defer takes over the reply to the request q being handled: the ask stays
// open when the handler returns, until Resolve, Fail or the asker's
// deadline, or Close (which fails it with ErrSystemClosed). After a Tell
// it returns a Deferred whose calls do nothing.
func Defer[S, M, C, R any](c *Context[S, M, C]) Deferred[R] {
	d := Deferred[R]{k: c.cell.k, key: c.cell.key}
	switch s := c.slot.(type) {
	case *slot[R]:
		d.s = s
	case *slot[any]:
		d.a = s
	default:
		return d
	}
	c.slot.setDeferred()
	c.cell.trackDeferred(c.slot)
	if c.cell.durable() {
		d.hold = c.cell
		if c.keyed != nil {
			d.kept = c.keyed.deferReply(*c.slot.requestID())
		}
	}
	return d
}

// Resolve answers the deferred request; it reports whether the asker
// still waited.
func (d Deferred[R]) Resolve(r R) bool {
	if d.hold != nil && (d.s != nil || d.a != nil) {
		if d.held(heldReply{answer: func() { d.resolve(r) }, fail: d.failNow}, func() retained { return d.kept.replied(r) }) {
			return d.open()
		}
	}
	return d.resolve(r)
}

// held holds r, the deferred reply, for the commit it waits for (see
// replyHolder), with its kept answer, which answer makes, for a keyed
// ask. It reports false when r must leave now.
func (d Deferred[R]) held(r heldReply, answer func() retained) bool {
	if d.kept == nil {
		return d.hold.holdReply(r)
	}
	return d.hold.holdKept(d.kept, answer(), r)
}

// resolve answers the deferred request with r now.
func (d Deferred[R]) resolve(r R) bool {
	switch {
	case d.s != nil:
		return completeHere(d.s, d.k, d.key, r)
	case d.a != nil:
		return d.a.complete(r, nil)
	}
	return false
}

// completeHere answers s, the slot of an asker in this process, with r.
// In a clustered system r is first measured against the message limit,
// as a reply to another node is (remoteAsk.outcome), so that a reply
// meets the same limit wherever its asker is: by its type's bound where
// it has one, else by encoding it.
func completeHere[R any](s *slot[R], k failer, key string, r R) bool {
	if limit := k.maxMessage(); limit > 0 && !codec.ReplyWithin[R](limit) {
		if err := replyFits(k, key, r, limit); err != nil {
			var zero R
			return s.complete(zero, err)
		}
	}
	return s.complete(r, nil)
}

// replyFits encodes r to measure it: ErrMessageTooLarge over limit, a
// failure of key when r does not encode (as for an asker on another node).
func replyFits(k failer, key string, r any, limit int) error {
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	body, err := codec.AppendReply(b, r)
	if err != nil {
		return k.failure(key, fmt.Errorf("encode reply %T: %w", r, err), false)
	}
	if len(body) > limit {
		return fmt.Errorf("%w: reply %T of %d bytes, limit %d", ErrMessageTooLarge, r, len(body), limit)
	}
	b.SetBytes(body[:0])
	return nil
}

// Fail answers the deferred request with err when the definition
// declares it, else with a failure wrapping ErrActorFailed. The failure
// is never a panic: Fail runs after the handler returned, and a panic's
// value passed to it is an error like any other.
func (d Deferred[R]) Fail(err error) bool {
	if d.k == nil {
		return false
	}
	ferr := err
	if !d.k.declared().Declares(err) {
		ferr = d.k.failure(d.key, err, false)
	}
	if d.hold != nil && (d.s != nil || d.a != nil) {
		if d.held(heldReply{answer: func() { d.failNow(ferr) }, fail: d.failNow}, func() retained { return d.kept.failed(d.k.declared(), err) }) {
			return d.open()
		}
	}
	return d.failNow(ferr)
}

// open reports whether the asker still waits for the deferred reply.
func (d Deferred[R]) open() bool {
	switch {
	case d.s != nil:
		return !d.s.finished()
	case d.a != nil:
		return !d.a.finished()
	}
	return false
}

// failNow answers the deferred request with ferr now.
func (d Deferred[R]) failNow(ferr error) bool {
	switch {
	case d.s != nil:
		var zero R
		return d.s.complete(zero, ferr)
	case d.a != nil:
		return d.a.complete(nil, ferr)
	}
	return false
}

// Pipe asks ref with m2 without blocking the handler. When the answer (or
// the failure) arrives, wrap turns it into a message that is told to this
// actor, so the handler sees it in order with the rest of its mail; it is
// queued even when the mailbox is at its bound, since the actor asked for
// it. wrap runs on whichever goroutine completes the ask: keep it to
// building the message. The target's ask timeout bounds the wait. Pipe
// never blocks: a target with a full mailbox refuses the ask at once.
//
// invalid, if not nil, is the caller's finding that the request is not an
// M2: wrap gets it at once.
func Pipe[S, M, C, M2, R any](c *Context[S, M, C], ref Ref[M2], m2 M2, invalid error, wrap func(R, error) M) {
	k, key := c.cell.k, c.cell.key
	var rid host.RequestID // the pipe's, once made
	// The pipe, and the answer it brings back, carry the trace context of
	// the message being handled: one request, one trace.
	tr := c.trace
	back := func(r R, err error) {
		// wrap may run on a timer's goroutine: its panic must not crash
		// the process, nor fail the actor that answered.
		defer func() {
			if p := recover(); p != nil {
				perr := k.panicked(p, debug.Stack())
				k.h.Emit(host.Event{Kind: host.MessageDropped, Type: k.def.Name, Key: key, Reason: "piped answer: wrap panicked", Err: perr})
				k.h.Logger.Warn("troupe: piped answer dropped", "actor", k.def.Name, "key", key, "request_id", rid.String(), "err", perr)
			}
		}()
		if terr := k.deliverAnswer(key, wrap(r, err), tr); terr != nil && !errors.Is(terr, ErrSystemClosed) {
			k.h.Logger.Warn("troupe: piped answer not delivered", "actor", k.def.Name, "key", key, "request_id", rid.String(), "err", terr)
		}
	}
	var zero R
	if invalid != nil {
		back(zero, invalid)
		return
	}
	if err := c.Base.gateOutput(); err != nil {
		back(zero, err)
		return
	}
	ref, err := ref.resolve(c)
	if err != nil {
		back(zero, err)
		return
	}
	to := ref.to.sink
	if met := ref.to.met; met != nil {
		// Counted as Ask counts, when the answer (or failure) arrives.
		start, deliver := time.Now(), back
		back = func(r R, err error) {
			met.ObserveAsk(time.Since(start), askResult(err, to))
			deliver(r, err)
		}
	}
	d := to.askTimeout()
	// One request, one id: the pipe carries the id of the ask being
	// handled, if any.
	if c.slot != nil && !c.slot.requestID().IsZero() {
		rid = *c.slot.requestID()
	} else {
		rid = to.host().NewRequestID()
	}
	s := &slot[R]{dl: time.Now().Add(d), rid: rid, opt: withOptions("", tr)}
	t := time.AfterFunc(d, func() {
		if s.cancel() {
			back(zero, askFailed(&askError{ref: ref.String(), cause: context.DeadlineExceeded}, s.rid, nil))
		}
	})
	s.onDone = outcomeFunc[R](func(r R, err error) {
		t.Stop()
		if err != nil {
			err = askFailed(err, s.rid, to)
		}
		back(r, err)
	})
	hk, tok := ref.hashes()
	if err := to.deliver(noWait, ref.key, hk, tok, m2, s, tr); err != nil {
		t.Stop()
		back(zero, askFailed(err, s.rid, nil))
	}
}

// noWait is a context that is already done: a pipe never blocks its
// handler, so a target whose mailbox is full refuses it at once (wrap
// gets ErrMailboxFull) even under the Wait policy.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// chainKey is the context key under which a handler's Context answers with
// the actors waiting on it: the asks up the call chain, then itself.
type chainKey struct{}

// inChain reports whether typ/key is in chain.
func inChain(chain []string, typ, key string) bool {
	for _, id := range chain {
		if len(id) == len(typ)+1+len(key) && id[len(typ)] == '/' && id[:len(typ)] == typ && id[len(typ)+1:] == key {
			return true
		}
	}
	return false
}
