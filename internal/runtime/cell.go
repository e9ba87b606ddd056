package runtime

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

// envelope is one queued message and, for asks, where its reply goes;
// a tell with a trace context has it there (a *tracedTell): an envelope
// is kept to a message and an interface, since a word more on every
// queued message would cost the tells without one.
type envelope[M any] struct {
	msg  M
	slot replier
}

// ask returns e's reply slot; nil for a tell (or a keptStep, a
// pruneStep or a wakeStep).
func (e *envelope[M]) ask() replier {
	switch e.slot.(type) {
	case *tracedTell, *keptStep, *pruneStep, *wakeStep, *firedTimer[M]:
		return nil
	}
	return e.slot
}

// trace returns e's trace context; nil for none.
func (e *envelope[M]) trace() *host.Trace {
	if e.slot == nil {
		return nil
	}
	return e.slot.trace()
}

// cell is one key's activation: mailbox, state and scheduling. A
// goroutine runs it while it has work and lingers a tick or two after; an
// idle cell holds no goroutine.
//
// The fields come in three groups, so that a sender and the cell's
// goroutine working at full speed do not write to one cache line the other
// reads for every message: first what a push reads and writes, last what
// the goroutine touches per message, and between them, at least a cache
// line long, what either touches rarely. (Sharing the lines cost the tell
// workload about a third of its CPU in cache misses.)
type cell[S, M, C any] struct {
	// Sender side.
	k        *kind[S, M, C]
	mu       sync.Mutex
	in       []envelope[M] // the newest messages; never empty while seg holds any
	seg      *segments[M]  // full segments of a long mailbox, or nil
	batchLen int32         // size of the batch the goroutine took last; bounds remaining
	hasIn    atomic.Bool   // in is not empty: lets the goroutine look without the lock
	running  bool          // a goroutine owns the cell
	parked   bool          // ... and waits on wake
	backoff  bool          // restarting after a failure
	gone     bool          // removed from the table; senders must look again
	// Goroutine side, in the padding of the sender's line (the goroutine
	// reads them with c.mu, on this line, held) so that an idle cell
	// fits the 160-byte size class.
	started bool // the activation ran its start (state initialised)
	shed    bool // an ask from another node would run inline: do not linger (inline.go)

	// Touched rarely, by either side.
	key  string
	room chan struct{}
	wake chan struct{}
	cur  replier // slot of the ask being handled, for abort

	idleSince int64  // unix nanoseconds the cell last went idle, or idleUnstamped
	exitTick  uint32 // linger tick (+1, truncated) at which its goroutine last exited
	// tells is set once the handler told a cell from its Context (see
	// handOff): only such cells open their runner's stash. Beside
	// exitTick, the two fill one word.
	tells atomic.Bool

	// run is the runner whose goroutine runs the cell, for tells from its
	// handler to hand off (see handoff.go); nil while no goroutine does.
	run atomic.Pointer[runner]

	// Goroutine side.
	state    S
	behavior Handler[S, M, C]
	x        *extra[M]
	// remaining is how many messages of the taken batch are still to be
	// handled. Only the cell's goroutine writes it, once per message; a
	// sender reads it only near the mailbox bound, so the hot path touches
	// no counter that both sides write.
	remaining atomic.Int32
	waiters   atomic.Int32 // senders waiting for room; read per message
}

// queuedLocked is the number of messages waiting; c.mu held.
func (c *cell[S, M, C]) queuedLocked() int { return c.inLen() + int(c.remaining.Load()) }

// segSize is the length at which the mailbox stops growing its slice and
// queues it as a full segment. Growing a long slice of messages copies it,
// and during a GC cycle the copy costs a write barrier per message (a
// quarter of a tell's CPU when a sender outran the goroutine); segments
// are never copied, and an emptied one is reused.
const segSize = 1024

// segments holds the full segments of a mailbox, oldest first.
type segments[M any] struct {
	full  [][]envelope[M]
	n     int           // messages in full
	spare []envelope[M] // an emptied segment, for the next
}

// inLen is the number of messages queued and not yet taken; c.mu held.
func (c *cell[S, M, C]) inLen() int {
	if c.seg != nil {
		return len(c.in) + c.seg.n
	}
	return len(c.in)
}

// claimLocked, after a message was queued, marks an idle cell running
// (start: the caller starts its goroutine) or takes the wake channel of
// its parked goroutine (the caller signals it); c.mu held.
func (c *cell[S, M, C]) claimLocked() (start bool, wake chan struct{}) {
	switch {
	case !c.running && !c.backoff:
		c.running = true
		return true, nil
	case c.parked:
		c.parked = false
		return false, c.wake
	}
	return false, nil
}

// put queues e; c.mu held.
func (c *cell[S, M, C]) put(e envelope[M]) {
	if len(c.in) >= segSize {
		s := c.seg
		if s == nil {
			s = &segments[M]{}
			c.seg = s
		}
		s.full = append(s.full, c.in)
		s.n += len(c.in)
		c.in, s.spare = s.spare, nil
		if c.in == nil {
			c.in = c.k.newSegment()
		}
	} else if len(c.in) == 0 {
		c.hasIn.Store(true)
	}
	c.in = append(c.in, e)
}

// take returns the oldest messages queued, as the next batch, and keeps
// the emptied buffer spare for the mailbox; c.mu held.
func (c *cell[S, M, C]) take(spare []envelope[M]) []envelope[M] {
	if s := c.seg; s != nil && len(s.full) > 0 {
		b := s.full[0]
		s.full[0] = nil
		s.full = s.full[1:]
		s.n -= len(b)
		if cap(spare) == segSize {
			if s.spare == nil {
				s.spare = spare[:0]
			} else {
				// A copy declared here: &spare itself would move the
				// parameter to the heap on every call (an allocation per
				// batch).
				sp := spare
				c.k.segments.Put(&sp)
			}
		}
		return b
	}
	b := c.in
	if cap(spare) < len(b) && len(b) > 1 {
		// The runner's spare is smaller than the burst just taken (a new
		// runner has none): senders that keep up the pace would grow it
		// again by doubling, an allocation and a copy each time.
		if cap(b) >= segSize {
			spare = c.k.newSegment()
		} else {
			spare = make([]envelope[M], 0, cap(b))
		}
	}
	c.in = spare[:0]
	c.hasIn.Store(false)
	return b
}

// takeAll empties the mailbox, returning what it held in order; c.mu
// held.
func (c *cell[S, M, C]) takeAll() []envelope[M] {
	in := c.in
	if s := c.seg; s != nil && s.n > 0 {
		all := make([]envelope[M], 0, s.n+len(in))
		for _, b := range s.full {
			all = append(all, b...)
		}
		in = append(all, in...)
		s.full, s.n = nil, 0
	}
	c.in = nil
	c.hasIn.Store(false)
	return in
}

// queued is the number of messages waiting.
func (c *cell[S, M, C]) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queuedLocked()
}

// extra holds what few cells need, to keep idle cells small.
type extra[M any] struct {
	timers map[string]*timerEntry[M]
	// recordChanged is set when the record of a durable key changed
	// besides its state: a timer fired once and left it, or a deferred
	// reply's answer was kept (see holdKept). The next commit writes it.
	recordChanged bool
	// timersStopped is set when Close or a move stopped a durable key's
	// timers: they no longer fire, but stay in the record that a message
	// still handled commits.
	timersStopped bool
	failures      int
	restartT      *time.Timer

	runCancel   context.CancelFunc
	runActive   bool
	runGen      uint64
	runFailures int
	runT        *time.Timer

	// deferred holds the asks whose replies handlers deferred, so Close
	// can fail those still open.
	deferred []replier

	// handling is set while a durable cell handles a message, whose
	// Context's gateMu is gate; held are the deferred replies given
	// meanwhile, which wait for its commit.
	handling bool
	gate     *sync.Mutex
	held     []heldReply
	// commits tracks a durable activation's writes in flight (see
	// asyncCommits).
	commits *asyncCommits
	// retained are the answers kept for keyed asks, oldest first (see
	// continuity.go): written by the cell's goroutine under its
	// Context's gateMu, read by its commits.
	retained []retained
	// keptNoted is set while the host's ledger counts this key's kept
	// answers (see noteKept); under the Context's gateMu.
	keptNoted bool
	// keptLoaded is how many kept answers the activation's load found
	// in the record, before it pruned those past their retention.
	keptLoaded int
	// pages are the key's pages of kept answers (see pages.go), nil
	// when it has none; under the Context's gateMu.
	pages *keptPages
}

// timerEntry is a live timer: when it fires next, its period (0: once)
// and its message, which a durable key stores with its state.
type timerEntry[M any] struct {
	t      *time.Timer
	due    time.Time
	period time.Duration
	msg    M
	// fired marks a durable key's one-shot timer that fired: it stays in
	// the record until the message it sent is handled (firedTimer).
	fired bool
	// saved marks a durable key's timer whose due time is the one the
	// last record made holds: an idle key whose timers are all saved may
	// passivate, and its owner wakes it when they are due.
	saved bool
}

// extIfAny returns the cell's extra, nil when it has none.
func (c *cell[S, M, C]) extIfAny() *extra[M] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.x
}

func (c *cell[S, M, C]) ext() *extra[M] {
	if c.x == nil {
		c.x = &extra[M]{}
	}
	return c.x
}

// push queues a message; force ignores the mailbox bound. retry means the cell was passivated meanwhile and
// the caller must look the key up again.
func (c *cell[S, M, C]) push(ctx context.Context, m M, s replier, force bool, tr *host.Trace) (err error, retry bool) {
	if s != nil {
		flushStash(ctx) // an asking handler blocks: what it stashed must not wait for it
	}
	c.mu.Lock()
	return c.pushLocked(ctx, m, s, force, tr)
}

// pushLocked is push after taking c.mu, which it releases.
func (c *cell[S, M, C]) pushLocked(ctx context.Context, m M, s replier, force bool, tr *host.Trace) (err error, retry bool) {
	k := c.k
	for {
		if c.gone {
			c.mu.Unlock()
			return nil, true
		}
		if k.h.Closed() {
			c.mu.Unlock()
			return ErrSystemClosed, false
		}
		if bound := k.def.Mailbox; force || c.inLen()+int(c.batchLen) < bound || c.queuedLocked() < bound {
			break
		}
		if k.def.Refuse && ctx.Value(holdKey{}) == nil {
			c.mu.Unlock()
			k.h.Emit(host.Event{Kind: host.MailboxFull, Type: k.def.Name, Key: c.key})
			return ErrMailboxFull, false
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.waiters.Add(1)
		// The goroutine lowers remaining without the lock and then looks
		// for waiters (took): look at remaining again now that this
		// waiter counts, or room made in between would wake nobody.
		if c.queuedLocked() < k.def.Mailbox {
			c.waiters.Add(-1)
			continue
		}
		c.mu.Unlock()
		flushStash(ctx)
		// An ask also stops waiting at its deadline, which is the ask
		// timeout when ctx has none.
		var expired <-chan time.Time
		var t *time.Timer
		if s != nil {
			if dl, ok := s.deadline(); ok {
				t = time.NewTimer(time.Until(dl))
				expired = t.C
			}
		}
		var gaveUp error
		select {
		case <-room:
		case <-ctx.Done():
			gaveUp = ctx.Err()
		case <-expired:
			gaveUp = context.DeadlineExceeded
		}
		if t != nil {
			t.Stop()
		}
		c.waiters.Add(-1)
		if gaveUp != nil {
			k.h.Emit(host.Event{Kind: host.MailboxFull, Type: k.def.Name, Key: c.key})
			return fmt.Errorf("%w: waited for room until: %w", ErrMailboxFull, gaveUp), false
		}
		c.mu.Lock()
	}
	if s == nil && tr != nil {
		s = (*tracedTell)(tr) // what the envelope carries; not the replier of an ask
	}
	c.put(envelope[M]{msg: m, slot: s})
	idlePeer := c.parked
	// wake is taken under the lock: failed and an exiting loop reset c.wake.
	start, wake := c.claimLocked()
	c.mu.Unlock()
	if idlePeer && s == nil {
		noteIdlePeer(ctx)
	}
	if start {
		if s != nil || !c.handOff(ctx) {
			k.h.Enter()
			go c.loop()
		}
	} else if wake != nil {
		nudge(wake)
	}
	return nil, false
}

// tell queues the tell m: push without a replier, with its common case
// (a busy cell, running and not parked, with room in its current buffer)
// first and in few instructions: nothing spilled, nothing called.
func (c *cell[S, M, C]) tell(ctx context.Context, m M) (err error, retry bool) {
	k := c.k
	c.mu.Lock()
	n := len(c.in)
	q := n + int(c.batchLen)
	if c.seg != nil {
		q += c.seg.n
	}
	if !c.running || c.parked || c.gone || n == 0 || n >= cap(c.in) || n >= segSize || q >= k.bound || k.h.Closed() {
		return c.pushLocked(ctx, m, nil, false, nil)
	}
	c.in = c.in[:n+1]
	c.in[n] = envelope[M]{msg: m}
	c.mu.Unlock()
	if n == segSize-1 {
		// This tell filled a segment while the actor's goroutine has not
		// taken any of it: a sender that never blocks would otherwise run
		// out its time slice, piling up mailboxes that no longer fit any
		// cache. Yield, so that the goroutines of the actors it feeds run.
		runtime.Gosched()
	}
	return nil, false
}

// nudge wakes the parked goroutine whose wake channel claimLocked took.
func nudge(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// took records that the goroutine is about to handle work[i], so
// work[i+1:] is what remains of the batch, and lets waiting senders in.
func (c *cell[S, M, C]) took(left int) {
	c.remaining.Store(int32(left))
	if c.waiters.Load() > 0 {
		c.mu.Lock()
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
		c.mu.Unlock()
	}
}

// lingerTicks is how many linger ticks an idle goroutine waits for work
// before it exits: enough to keep ping-pong style traffic on one
// goroutine, short enough that idle actors cost no goroutine.
const lingerTicks = 2

// warm reports whether c went idle only a tick or two ago: traffic comes
// in bursts, so its goroutine parks and lingers before exiting. A cold
// cell's goroutine exits as soon as its mailbox is empty, so a million
// one-message activations do not leave a million goroutines waiting.
func (c *cell[S, M, C]) warm() bool {
	// Modular in 32 bits: a tick count that wrapped misjudges one
	// linger, no more.
	return c.exitTick != 0 && uint32(c.k.h.TickCount())+1-c.exitTick <= lingerTicks
}

// runOn runs c on r's goroutine until c goes idle, fails or hands off; it
// returns the cell to run next (handed off or stashed), or nil.
func (c *cell[S, M, C]) runOn(r *runner) runnable { return c.runWith(r, c.stateOn(r)) }

// runWith is runOn with c's loop state ls. A nil r (a cold start) runs c
// alone, and returns c itself, still running, when c turns out busy.
func (c *cell[S, M, C]) runWith(r *runner, ls *loopState[S, M, C]) runnable {
	h := c.k.h
	ctx, work := &ls.ctx, ls.work
	if r != nil && c.run.Load() != r {
		c.run.Store(r)
	}
	idle := 0
	handled := 0 // batches handled in this run
	// Tells succeed where they are taken (host.TypeMeter): counted here,
	// and added to the meter when the run ends, when it parks, and every
	// tellFlush tells, so that a busy actor costs an atomic add per
	// thousand tells rather than per batch.
	met := c.k.tgt.met
	var told uint64
	if met != nil {
		defer func() {
			if told > 0 {
				met.Tells[host.OutcomeOK].Add(told)
			}
		}()
	}
	c.mu.Lock()
	warm := c.warm()
	for {
		if len(c.in) == 0 {
			if told > 0 {
				met.Tells[host.OutcomeOK].Add(told)
				told = 0
			}
			if !warm || idle >= lingerTicks || h.Closed() || !c.started || c.shed {
				c.shed = false
				ls.work = work
				c.idle(false)
				return nil
			}
			if c.wake == nil {
				c.wake = make(chan struct{}, 1)
			}
			tick, _ := h.Tick()
			c.parked = true
			wake := c.wake
			c.mu.Unlock()
			select {
			case <-wake:
			case <-tick:
				idle++
			}
			c.mu.Lock()
			c.parked = false
			continue
		}
		idle = 0
		handled++
		if handled > 1 {
			if r == nil { // busy after all: go on with a runner, which hands off
				c.exitTick = uint32(h.TickCount()) + 1 // and is warm
				c.mu.Unlock()
				return c
			}
			warm = true
		}
		work = c.take(work)
		c.batchLen = int32(len(work))
		c.remaining.Store(int32(len(work)))
		c.mu.Unlock()
		if met != nil {
			told += tells(work)
			if told >= tellFlush {
				met.Tells[host.OutcomeOK].Add(told)
				told = 0
			}
		}
		ok := c.handleBatch(ctx, work, r)
		clear(work)
		var next runnable
		peer := false
		if r != nil {
			next = r.take()
			peer = r.idlePeer.Load() && r.idlePeer.Swap(false)
		}
		if !ok { // failed: restart scheduled, the cell is no longer ours
			ls.work = work
			return next
		}
		c.mu.Lock()
		if next == nil {
			if peer && len(c.in) == 0 {
				// The handler told a cell whose goroutine waits idle:
				// two goroutines bounce messages and yield in between. Go
				// idle at once instead, so the answer can hand off.
				ls.work = work
				c.idle(true)
				return nil
			}
			continue
		}
		if len(c.in) == 0 {
			// Hand off: c goes idle and this goroutine runs next.
			ls.work = work
			c.idle(true)
			if r.handoffs++; r.handoffs >= maxHandoffs {
				r.handoffs = 0
				runtime.Gosched()
			}
			return next
		}
		// c has more mail: next gets a goroutine of its own.
		c.mu.Unlock()
		h.Enter()
		go next.loop()
		c.mu.Lock()
	}
}

// tellFlush bounds the tells a busy actor's goroutine counts before it
// adds them to its type's meter: how far behind a scrape may see it.
const tellFlush = 1024

// tells counts the tells in work: the envelopes no asker waits on.
func tells[M any](work []envelope[M]) uint64 {
	var n uint64
	for i := range work {
		if work[i].slot == nil {
			n++
		} else if !isStep(work[i].slot) && work[i].ask() == nil {
			n++
		}
	}
	return n
}

// isStep reports whether s is a step of the runtime's own, not a
// message: no tell to count.
func isStep(s replier) bool {
	switch s.(type) {
	case *keptStep, *pruneStep, *wakeStep:
		return true
	}
	return false
}

// idle lets c go idle: no goroutine runs it any more. The caller holds c.mu;
// idle releases it. It reads no clock (a good part of a hand-off's cost,
// and of a one-off activation's where reading it takes 140 ns): the idle
// sweep stamps the cell when it first finds it idle.
func (c *cell[S, M, C]) idle(handoff bool) {
	h := c.k.h
	c.running = false
	c.batchLen = 0
	c.wake = nil
	c.idleSince = idleUnstamped
	if !handoff && c.run.Load() != nil {
		c.run.Store(nil) // a hand-off keeps it: see loopState.unlink
	}
	c.exitTick = uint32(h.TickCount()) + 1
	released := !c.started
	c.mu.Unlock()
	if released {
		c.k.forget(c, "released", time.Time{}, time.Time{})
	}
}

// handleBatch handles work in order. It returns false when the goroutine
// must exit because the activation failed.
func (c *cell[S, M, C]) handleBatch(ctx *Context[S, M, C], work []envelope[M], r *runner) bool {
	// Read once per batch: c.k shares its cache line with the senders'
	// mutex.
	h := c.k.h
	stop := h.HardStop()
	def := c.k.def.Handler
	// The last message of a batch takes the full path when a runner may
	// open its stash for it.
	last := len(work)
	if r != nil || last == 1 {
		last--
	}
	durable := h.Store != nil && c.k.def.Durable
	if durable {
		last = 0 // each message commits its state: the full path
	}
	for i := 0; i < len(work); i++ {
		var ran bool
		var err error
		if i < last { // else not worth the call: a one-message batch, say
			if i, ran, err = c.runTells(ctx, work, i, last, def); i == len(work) {
				break
			}
		}
		e := &work[i]
		var rid host.RequestID // the failed message's, when an ask
		if !ran {
			s := e.ask()
			if r != nil && i == len(work)-1 && c.tells.Load() && !c.hasIn.Load() {
				r.open() // c may go idle after this one: its tells may hand off
			}
			// Closed comes first, so one atomic load per message
			// replaces a channel poll: the hard stop follows the close.
			if h.Closed() {
				select {
				case <-stop:
					c.took(0)
					c.failAll(work[i:], ErrSystemClosed)
					return true
				default:
				}
			}
			c.took(len(work) - i - 1)
			if durable && c.ranStep(ctx, e) {
				continue
			}
			if s != nil {
				if !s.begin() {
					c.dropStopped()
					continue
				}
				c.mu.Lock()
				c.cur = s
				c.mu.Unlock()
			}
			var panicked bool
			if durable {
				c.handling(ctx)
			}
			panicked, err = c.invoke(ctx, e, def)
			if durable {
				if ctx.keyed != nil {
					c.keepAnswer(ctx, e, err, panicked)
				}
				err = c.settle(ctx, e, err)
			}
			// A recovered panic is a failure whatever its value wraps.
			refused := err != nil && !panicked && c.k.def.Errors.Declares(err)
			if err != nil && !refused {
				// Counted before the asker hears of the failure, so
				// that Stats.Restarts already says so when Ask returns.
				c.k.h.Restarts.Add(1)
			}
			if s != nil {
				rid = c.answer(ctx, s, err, refused, panicked)
			}
			ctx.slot, ctx.trace = nil, nil
			if refused {
				err = nil // a declared error is no failure: no restart, no backoff
			}
		}
		if err != nil && ran {
			h.Restarts.Add(1) // a tell of a batch failed: no asker to tell first
		}
		if err != nil {
			if ctx.release { // released and failed: end it, then back off
				ctx.release = false
				c.end("released")
			}
			c.failed(err, rid, work[i+1:])
			return false
		}
		if c.x != nil {
			c.x.failures = 0
		}
		if ctx.release {
			ctx.release = false
			c.end("released")
		}
	}
	return true
}

// The cold parts of handleBatch live in functions of their own, kept out
// of line: their locals (an event, a request id, a failure) would
// otherwise grow its frame, and with it the stack an activation's
// goroutine needs before it runs its first message: past the first stack
// size, every activation copies its stack once (docs/architecture.md,
// "Performance tricks").

// ranStep runs e if it is a step a durable key queues on itself (a
// deferred reply to keep, a prune, a wake), and reports whether it was.
//
//go:noinline
func (c *cell[S, M, C]) ranStep(ctx *Context[S, M, C], e *envelope[M]) bool {
	ctx.fired = nil
	switch st := e.slot.(type) {
	case *keptStep:
		c.keepGiven(ctx, st)
		return true
	case *pruneStep:
		c.pruneKept(ctx, st)
		return true
	case *wakeStep:
		c.wakeTimers(ctx, st)
		return true
	case *firedTimer[M]:
		c.handledTimer(ctx, st)
	}
	return false
}

// dropStopped reports an ask dropped because its asker stopped waiting.
//
//go:noinline
func (c *cell[S, M, C]) dropStopped() {
	c.k.h.Emit(host.Event{Kind: host.MessageDropped, Type: c.k.def.Name, Key: c.key, Reason: "asker stopped waiting"})
}

// answer ends the ask s after its handler ran: with the answer kept for
// its idempotency key, the declared error it refused with, its failure,
// or ErrNoReply; it returns the ask's request id when it failed.
//
//go:noinline
func (c *cell[S, M, C]) answer(ctx *Context[S, M, C], s replier, err error, refused, panicked bool) (rid host.RequestID) {
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
	if kept, kerr := ctx.kept, ctx.keptErr; kept != nil || kerr != nil {
		// After settle's read barrier: this node still owns the key, and
		// the write that kept the answer met its level.
		ctx.kept, ctx.keptErr = nil, nil
		if kerr != nil {
			s.fail(kerr)
		} else {
			c.answerKept(s, kept)
		}
	} else if refused {
		s.fail(err) // an answer: the asker gets the declared error itself
	} else if err != nil {
		rid = *s.requestID()
		fe := c.k.failure(c.key, err, panicked)
		fe.RequestID = rid.String()
		s.fail(fe)
	} else if !s.settled() {
		s.fail(ErrNoReply)
	}
	return rid
}

// runTells handles the plain tells of work[i:last] to a started
// activation, under one recover for all of them rather than one per
// message. It stops at the first message that needs handleBatch's full
// path (an ask, an activation to start, a closed system, the batch's
// last message), before handling it, or at the first handled message
// that failed or released the activation; ran tells which, err is the
// failure, and j the message's index (len(work) when all went well).
func (c *cell[S, M, C]) runTells(ctx *Context[S, M, C], work []envelope[M], i, last int, def Handler[S, M, C]) (j int, ran bool, err error) {
	j = i
	defer func() {
		if v := recover(); v != nil {
			err = c.k.panicked(v, debug.Stack())
		}
	}()
	h := c.k.h
	// Read once: started lies on the senders' line, and nothing in the
	// loop changes it (activate and end run outside it). A host with a
	// tracer takes the full path, which calls it.
	if !c.started || h.Tracer != nil {
		return j, false, nil
	}
	for ; j < len(work); j++ {
		e := &work[j]
		if j >= last || e.slot != nil || h.Closed() { // an ask, or a tell with a trace context
			return j, false, nil
		}
		c.took(len(work) - j - 1)
		hd := c.behavior
		if hd == nil {
			hd = def
		}
		ran = true
		if err = hd(&ctx.user, e.msg); err != nil && c.k.def.Errors.Declares(err) {
			err = nil // a tell answered with a declared error: nobody to tell, nothing failed
		}
		if err != nil || ctx.release {
			return j, true, err
		}
		ran = false
		if c.x != nil {
			c.x.failures = 0
		}
	}
	return j, false, nil
}

// invoke runs the current behaviour, or def, on e; panicked reports
// that err is the handler's recovered panic.
func (c *cell[S, M, C]) invoke(ctx *Context[S, M, C], e *envelope[M], def Handler[S, M, C]) (panicked bool, err error) {
	ctx.slot, ctx.trace = e.ask(), e.trace()
	var traced func(error) // the tracer's, once it was called
	defer func() {
		if r := recover(); r != nil {
			panicked, err = true, c.k.panicked(r, debug.Stack())
		}
		if traced != nil {
			traced(err)
		}
	}()
	fresh := !c.started
	if fresh {
		if err := c.activate(ctx); err != nil {
			return false, c.notStarted(ctx, err)
		}
	}
	ctx.attempt = 1
	if c.durable() && ctx.slot != nil && ctx.slot.idempotencyKey() != "" && c.answeredKept(ctx, e) {
		return false, nil
	}
	if c.strict() && !c.admitted(ctx, fresh) {
		return false, nil
	}
	if ctx.keyed != nil {
		ctx.attempt = int(ctx.keyed.attempt)
	}
	hd := c.behavior
	if hd == nil {
		hd = def
	}
	if tracer := c.k.h.Tracer; tracer != nil {
		traced = ctx.startTrace(tracer)
	}
	return false, hd(&ctx.user, e.msg)
}

// The cold paths of invoke live in functions of their own, kept out of
// line, as handleBatch's do (see ranStep).

// notStarted records why the activation did not start and returns it.
//
//go:noinline
func (c *cell[S, M, C]) notStarted(ctx *Context[S, M, C], err error) error {
	if ctx.unreached && c.strict() {
		// The key could not be acquired: nor can the message be
		// admitted.
		err = fmt.Errorf("%w: %w", ErrNotAdmitted, err)
	}
	ctx.startErr = err
	return err
}

// answeredKept looks a keyed ask up: a keyed ask runs once, a retry gets
// the answer kept. It reports whether the ask is answered (kept, or
// failed to be looked up) and must not run.
//
//go:noinline
func (c *cell[S, M, C]) answeredKept(ctx *Context[S, M, C], e *envelope[M]) bool {
	kept, err := c.lookupKeyed(ctx, e)
	if err != nil {
		ctx.keptErr = err
		return true
	}
	if kept != nil {
		ctx.kept = kept
		return true
	}
	return false
}

// admitted admits the message under strict durability; refused, the
// handler does not run.
//
//go:noinline
func (c *cell[S, M, C]) admitted(ctx *Context[S, M, C], fresh bool) bool {
	err := c.admit(ctx, fresh)
	if err == nil {
		return true
	}
	ctx.keyed = nil
	if ctx.slot == nil {
		c.k.h.Emit(host.Event{Kind: host.MessageDropped, Type: c.k.def.Name, Key: c.key, Reason: "not admitted", Err: err})
		return false
	}
	// Answered now: settle then fails to commit, as the admission did,
	// and ends the activation.
	ctx.slot.fail(err)
	return false
}

// activate starts an activation: initial (or stored) state, event, run
// body, stored timers.
func (c *cell[S, M, C]) activate(ctx *Context[S, M, C]) error {
	var s S
	var timers []liveTimer[M]
	if c.durable() {
		var err error
		if s, timers, err = c.load(ctx); err != nil {
			return err
		}
	} else if c.k.def.Init != nil {
		s = c.k.def.Init(c.key)
	}
	c.mu.Lock()
	c.state = s
	c.behavior = nil
	c.started = true
	c.mu.Unlock()
	if c.k.h.Observer != nil {
		// Tested here: Emit is not inlined into activate, and the call
		// alone would take an activation's goroutine past its first
		// stack.
		c.k.h.Emit(host.Event{Kind: host.ActivationStarted, Type: c.k.def.Name, Key: c.key})
	}
	if c.k.def.Run != nil {
		c.startRun()
	}
	if ctx.fired != nil {
		timers = c.dropFired(ctx, timers)
	}
	if len(timers) > 0 {
		c.rearm(timers)
	}
	return nil
}

// dropFired drops from timers, loaded by an activation that the message
// of ctx.fired starts, that one-shot timer: it fired (at its due time)
// in an activation that ended before its message was handled, and this
// message's commit takes it out of the record.
//
//go:noinline
func (c *cell[S, M, C]) dropFired(ctx *Context[S, M, C], timers []liveTimer[M]) []liveTimer[M] {
	ft := ctx.fired
	ctx.fired = nil
	i := slices.IndexFunc(timers, func(t liveTimer[M]) bool {
		return t.name == ft.name && t.period == 0 && !t.due.After(ft.e.due)
	})
	if i < 0 {
		return timers
	}
	c.mu.Lock()
	c.ext().recordChanged = true
	c.mu.Unlock()
	return slices.Delete(timers, i, i+1)
}

// durable reports whether the kind keeps its keys' state in the store.
func (c *cell[S, M, C]) durable() bool { return c.k.def.Durable && c.k.h.Store != nil }

// end finishes the activation: timers and body stop, state is dropped
// (a durable key's stays stored, and the key is resigned).
func (c *cell[S, M, C]) end(reason string) {
	c.mu.Lock()
	c.stopTimersLocked()
	c.stopRunLocked()
	var zero S
	wasStarted := c.started
	c.state, c.behavior, c.started = zero, nil, false
	c.mu.Unlock()
	if wasStarted && c.durable() {
		c.k.h.Store.Resign(c.k.def.Name, c.key)
	}
	c.k.h.Emit(host.Event{Kind: host.ActivationEnded, Type: c.k.def.Name, Key: c.key, Reason: reason})
}

// warn logs msg about this key with err, and the request id of s, the
// reply slot of the message it is about (nil for a tell).
func (c *cell[S, M, C]) warn(msg string, s replier, err error) {
	var rid host.RequestID
	if s != nil {
		rid = *s.requestID()
	}
	if rid.IsZero() {
		c.k.h.Logger.Warn(msg, "actor", c.k.def.Name, "key", c.key, "err", err)
		return
	}
	c.k.h.Logger.Warn(msg, "actor", c.k.def.Name, "key", c.key, "request_id", rid.String(), "err", err)
}

// failed schedules a restart after backoff, keeping the unhandled rest
// of the batch at the head of the mailbox. rid is the request id of the
// ask whose handler failed; zero for a tell.
func (c *cell[S, M, C]) failed(err error, rid host.RequestID, rest []envelope[M]) {
	h := c.k.h // the restart was counted where the failure was found, before its reply
	h.Emit(host.Event{Kind: host.ActivationFailed, Type: c.k.def.Name, Key: c.key, Err: err})
	if rid.IsZero() {
		h.Logger.Warn("troupe: actor failed", "actor", c.k.def.Name, "key", c.key, "err", err)
	} else {
		h.Logger.Warn("troupe: actor failed", "actor", c.k.def.Name, "key", c.key, "request_id", rid.String(), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(rest) > 0 {
		queued := c.takeAll()
		in := make([]envelope[M], 0, len(rest)+len(queued))
		c.in = append(append(in, rest...), queued...)
		c.hasIn.Store(true)
	}
	c.remaining.Store(0)
	c.batchLen = 0
	x := c.ext()
	x.failures++
	delay := backoffDelay(c.k.bmin, c.k.bmax, x.failures)
	c.behavior = nil
	c.running, c.backoff = false, true
	c.wake = nil
	c.run.Store(nil)
	c.idleSince = time.Now().UnixNano()
	if h.Closed() {
		c.backoff = false
		c.drainLocked(ErrSystemClosed)
		return
	}
	x.restartT = time.AfterFunc(delay, c.restart)
}

func backoffDelay(min, max time.Duration, failures int) time.Duration {
	d := min
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return clamp(d, min, max)
}

func clamp(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		return lo
	}
	if d > hi {
		return hi
	}
	return d
}

// restart ends the backoff and resumes the mailbox.
func (c *cell[S, M, C]) restart() {
	c.mu.Lock()
	if !c.backoff {
		c.mu.Unlock()
		return
	}
	c.backoff = false
	if c.x != nil {
		c.x.restartT = nil
	}
	if c.k.h.Closed() {
		c.drainLocked(ErrSystemClosed)
		c.mu.Unlock()
		return
	}
	start := len(c.in) > 0 && !c.running
	if start {
		c.running = true
	}
	c.mu.Unlock()
	if start {
		c.k.h.Enter()
		go c.loop()
	}
}

// drainLocked fails everything queued; the caller holds c.mu.
func (c *cell[S, M, C]) drainLocked(err error) {
	in := c.takeAll()
	if c.room != nil { // senders waiting for room must see the close
		close(c.room)
		c.room = nil
	}
	go c.failAll(in, err) // outside the lock: completing slots runs pipe callbacks
}

func (c *cell[S, M, C]) failAll(es []envelope[M], err error) {
	for _, e := range es {
		if s := e.ask(); s != nil {
			s.abort(err)
		} else if st, ok := e.slot.(*keptStep); ok {
			st.abort(err)
		} else if st, ok := e.slot.(*wakeStep); ok {
			st.finish(err)
		}
		c.k.h.Emit(host.Event{Kind: host.MessageDropped, Type: c.k.def.Name, Key: c.key, Reason: err.Error()})
	}
}

// idleUnstamped marks a cell that went idle at a time not read yet.
const idleUnstamped = math.MaxInt64

// passivatable reports whether the cell may leave the table; c.mu held.
// An unstamped idle cell is stamped with now, the sweep's time, an upper
// bound of the true time, so it leaves at most one sweep late, never
// early.
func (c *cell[S, M, C]) passivatable(idleBefore, now time.Time) bool {
	if c.gone || c.running || c.backoff || c.queuedLocked() != 0 {
		return false
	}
	if x := c.x; x != nil && ((len(x.timers) > 0 && !x.timersStopped && !c.timersSavedLocked(now)) || x.runActive || x.runT != nil || x.commits.busy()) {
		return false
	}
	if idleBefore.IsZero() {
		return true
	}
	if c.idleSince == idleUnstamped {
		c.idleSince = now.UnixNano()
	}
	return c.idleSince < idleBefore.UnixNano()
}

// timersSavedLocked reports whether the activation's timers are all in
// the key's stored record as they stand: a durable key's, none fired and
// waiting for its message, nothing of the record left to write, none due
// within sleepMargin of now. Such a key may passivate with live timers:
// its owner's store wakes it when the first is due (system's waker,
// through WakeTimers). c.mu held.
func (c *cell[S, M, C]) timersSavedLocked(now time.Time) bool {
	x := c.x
	if !c.durable() || x.recordChanged {
		return false
	}
	for _, e := range x.timers {
		if !e.saved || e.fired || e.due.Sub(now) < sleepMargin {
			return false
		}
	}
	return true
}

// sleepMargin is how far off a durable key's first timer must be for the
// key to passivate with it: one due sooner fires from the activation
// (the waker wakes a key a little before its timer, and a key about to
// fire should not leave and come back for it).
const sleepMargin = 200 * time.Millisecond

func (c *cell[S, M, C]) setTimer(name string, d time.Duration, msg M, repeat bool) {
	period := time.Duration(0)
	if repeat {
		period = d
	}
	c.armTimer(name, d, period, msg, false)
}

// armTimer sets the named timer to fire after d, then every period (0:
// once); saved says the key's stored record holds it so (see
// timerEntry.saved).
func (c *cell[S, M, C]) armTimer(name string, d, period time.Duration, msg M, saved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.k.h.Closed() {
		return
	}
	x := c.ext()
	if x.timers == nil {
		x.timers = make(map[string]*timerEntry[M])
	}
	if old := x.timers[name]; old != nil {
		old.t.Stop()
	}
	e := &timerEntry[M]{due: time.Now().Add(d), period: period, msg: msg, saved: saved}
	e.t = time.AfterFunc(d, func() { c.fire(name, e) })
	if x.timersStopped {
		e.t.Stop() // kept for the record only
	}
	x.timers[name] = e
}

func (c *cell[S, M, C]) fire(name string, e *timerEntry[M]) {
	c.mu.Lock()
	if c.gone || c.x == nil || c.x.timersStopped || c.x.timers[name] != e {
		c.mu.Unlock()
		return
	}
	var slot replier
	switch {
	case e.period > 0:
		e.due = time.Now().Add(e.period)
		e.t.Reset(e.period)
		e.saved = false
		if c.durable() && c.k.idle > 0 && e.period >= c.k.idle {
			// The key may passivate before the next tick: the commit of
			// this tick's message stores when that one is due, for the
			// waker (timersSavedLocked). A shorter period keeps it active.
			c.x.recordChanged = true
		}
	case c.durable():
		// Kept in the record until its message is handled: a crash
		// before that commit fires it again on the next activation.
		e.fired = true
		slot = &firedTimer[M]{name: name, e: e}
	default:
		delete(c.x.timers, name)
	}
	msg := e.msg
	c.mu.Unlock()
	if err := c.k.push(context.Background(), c.key, 0, msg, slot, false, nil); err != nil { // timers belong to this activation: never routed
		if slot != nil {
			c.mu.Lock()
			if c.x != nil && c.x.timers[name] == e {
				delete(c.x.timers, name)
				c.x.recordChanged = true
			}
			c.mu.Unlock()
		}
		c.k.h.Emit(host.Event{Kind: host.MessageDropped, Type: c.k.def.Name, Key: c.key, Reason: "timer " + name + ": " + err.Error(), Err: err})
	}
}

// firedTimer rides, in an envelope's slot as a tracedTell does, with the
// message of a durable key's one-shot timer: handling it takes the timer
// out of the record, in the commit of the message it sent.
type firedTimer[M any] struct {
	pruneStep
	name string
	e    *timerEntry[M]
}

// handledTimer takes the one-shot timer that sent the message being
// handled out of the record, unless it was set again or cancelled since.
// The activation that armed it may have ended since (Release) with the
// record still holding it: the message then activates the key, and the
// activation drops the timer from what it loads (dropFired) rather than
// fire it again.
func (c *cell[S, M, C]) handledTimer(ctx *Context[S, M, C], ft *firedTimer[M]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		ctx.fired = ft
		return
	}
	if c.x != nil && c.x.timers[ft.name] == ft.e {
		delete(c.x.timers, ft.name)
		c.x.recordChanged = true
	}
}

func (c *cell[S, M, C]) cancelTimer(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.x == nil || c.x.timers[name] == nil || c.x.timers[name].fired {
		return false // a fired one leaves with its message's commit
	}
	c.x.timers[name].t.Stop()
	delete(c.x.timers, name)
	return true
}

// stopTimersLocked stops the activation's timers and forgets them; c.mu
// held.
func (c *cell[S, M, C]) stopTimersLocked() {
	if c.x == nil {
		return
	}
	c.x.timersStopped = false
	for name, e := range c.x.timers {
		e.t.Stop()
		delete(c.x.timers, name)
	}
}

// haltTimersLocked stops the timers of an activation that Close or a
// move ends: a durable key's stay in its record, for the messages it
// still handles to commit with; c.mu held.
func (c *cell[S, M, C]) haltTimersLocked() {
	if !c.durable() {
		c.stopTimersLocked()
		return
	}
	if c.x == nil {
		return
	}
	c.x.timersStopped = true
	for _, e := range c.x.timers {
		e.t.Stop()
	}
}

// startRun starts the proactive body for the current activation.
func (c *cell[S, M, C]) startRun() {
	h := c.k.h
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if h.Closed() {
		c.mu.Unlock()
		cancel()
		return
	}
	x := c.ext()
	x.runGen++
	gen := x.runGen
	x.runCancel, x.runActive, x.runT = cancel, true, nil
	c.mu.Unlock()
	self := c.k.ref(c.key)
	body := c.k.def.Run
	h.Enter()
	go func() {
		defer h.Leave()
		defer cancel()
		err := runSafely(ctx, body, self, c.k.panicked)
		c.mu.Lock()
		defer c.mu.Unlock()
		if x.runGen != gen {
			return // this activation's body was stopped
		}
		x.runActive, x.runCancel = false, nil
		if err == nil || ctx.Err() != nil || h.Closed() {
			x.runFailures = 0
			return
		}
		x.runFailures++
		h.Restarts.Add(1)
		h.Emit(host.Event{Kind: host.ActivationFailed, Type: c.k.def.Name, Key: c.key, Err: err, Reason: "run body"})
		h.Logger.Warn("troupe: actor body failed", "actor", c.k.def.Name, "key", c.key, "err", err)
		delay := backoffDelay(c.k.bmin, c.k.bmax, x.runFailures)
		x.runT = time.AfterFunc(delay, func() {
			c.mu.Lock()
			ok := x.runGen == gen && x.runT != nil && c.started
			x.runT = nil
			c.mu.Unlock()
			if ok {
				c.startRun()
			}
		})
	}()
}

func runSafely[M any](ctx context.Context, body func(context.Context, Ref[M]) error, self Ref[M], panicked func(any, []byte) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(r, debug.Stack())
		}
	}()
	return body(ctx, self)
}

func (c *cell[S, M, C]) stopRunLocked() {
	x := c.x
	if x == nil {
		return
	}
	x.runGen++
	if x.runCancel != nil {
		x.runCancel()
	}
	if x.runT != nil {
		x.runT.Stop()
	}
	x.runCancel, x.runActive, x.runT = nil, false, nil
}

// stop begins shutdown for this cell: timers and body stop, a cell in
// backoff fails its mailbox, a lingering goroutine is woken to exit.
func (c *cell[S, M, C]) stop() {
	c.mu.Lock()
	deferred := c.takeDeferredLocked()
	defer func() {
		c.mu.Unlock()
		// Nothing will answer them: their answers would come as messages,
		// which the closed system refuses.
		for _, d := range deferred {
			d.abort(errClosedWhileRunning)
		}
	}()
	c.haltTimersLocked()
	c.stopRunLocked()
	if c.backoff {
		if c.x != nil && c.x.restartT != nil {
			c.x.restartT.Stop()
		}
		c.backoff = false
		c.drainLocked(ErrSystemClosed)
	}
	if c.parked {
		nudge(c.wake)
	}
}

// trackDeferred remembers an ask whose reply was deferred, dropping the
// ones already answered.
func (c *cell[S, M, C]) trackDeferred(s replier) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.ext()
	live := x.deferred[:0]
	for _, d := range x.deferred {
		if !d.finished() {
			live = append(live, d)
		}
	}
	clear(x.deferred[len(live):])
	x.deferred = append(live, s)
}

// takeDeferredLocked returns the deferred asks and forgets them.
func (c *cell[S, M, C]) takeDeferredLocked() []replier {
	if c.x == nil {
		return nil
	}
	d := c.x.deferred
	c.x.deferred = nil
	return d
}

// abort cancels the running ask and fails what is queued.
func (c *cell[S, M, C]) abort() {
	c.mu.Lock()
	cur, started := c.cur, c.started
	c.drainLocked(ErrSystemClosed)
	c.mu.Unlock()
	if cur != nil {
		err := errClosedWhileRunning
		if !started {
			err = ErrSystemClosed // still starting (its load): the handler never ran
		}
		cur.abort(err)
	}
}
