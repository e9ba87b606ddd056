package runtime

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/troupe-go/troupe/internal/host"
)

// Direct hand-off. A goroutine that runs cells is a runner. While a runner
// handles the last message of a batch with nothing else queued, for a cell
// whose handler told other cells before, its stash is open: a Tell from that handler that wakes an idle cell (one with no
// goroutine) claims the cell and leaves it in the stash instead of
// starting a goroutine for it. When the handler returns and the runner's
// own cell has nothing queued, the runner lets its cell go idle and runs
// the stashed cell's batch itself. Two actors bouncing a message thus
// share one goroutine and never go through the Go scheduler; without the
// hand-off each message costs a goroutine wake-up, and an emptied cell's
// yields contend for the scheduler's global run queue.
//
// The stashed cell runs late by at most the rest of one handler. It gets
// a goroutine of its own instead when the runner's cell got more mail
// meanwhile (from the runner, after the handler), when the handler asks or
// waits for mailbox room (at once: it may wait for the stashed cell), and
// when the handler blocks or runs long otherwise (from the host's linger
// clock, which starts cells stashed for over a tick). Only tells are
// stashed, and only within one system: a cell of another system belongs
// to that system's Close.
//
// A cold start (a cell idle for more than the linger ticks, most likely a
// one-off activation) runs without a runner until its cell gets a second
// batch, so a million activations pay nothing for this. Two cells that
// got goroutines of their own (the clock started a stashed cell) find
// each other busy and would never hand off again; noteIdlePeer brings
// them back.

// runnable is a cell as the untyped runner sees it.
type runnable interface {
	// runOn runs the cell on r's goroutine until it goes idle or hands
	// off; it returns the stashed cell to run next, if any.
	runOn(r *runner) runnable
	// loop is the body of a new goroutine running the cell.
	loop()
}

// Stash states. Only the runner moves closed to open (before a handler)
// and back, or full to closed (after it); a pusher moves open to filling
// to full; the host's clock, stealing a stale stash, moves full to
// filling to open.
const (
	stashClosed  int32 = iota // no handler that may stash runs
	stashOpen                 // the last handler of a batch runs: a tell may stash
	stashFilling              // next is being written or taken
	stashFull                 // next holds a claimed cell
)

// maxHandoffs bounds the hand-offs in a row before the runner yields the
// processor once, so a pair of actors bouncing a message does not keep it
// from goroutines waiting in the scheduler's queue.
const maxHandoffs = 64

// runner is the hand-off state of one goroutine that runs cells.
type runner struct {
	h          *host.Host
	state      atomic.Int32
	registered atomic.Bool // the host's clock watches this runner's stash
	idlePeer   atomic.Bool // the open handler told a cell whose goroutine waits idle
	next       runnable    // guarded by state: the claimed cell
	tick       uint64      // guarded by state: the linger tick next was stashed at
	handoffs   int         // hand-offs in a row; the runner's goroutine only
	// loop states (Context, spare mailbox buffer) of the last cells this
	// runner ran, so a hand-off back and forth allocates nothing.
	ls     [2]any
	victim int
}

// open lets the handler about to run stash one cell.
func (r *runner) open() { r.state.Store(stashOpen) }

// take closes the stash and returns the cell in it, if any.
func (r *runner) take() runnable {
	for {
		switch r.state.Load() {
		case stashClosed:
			return nil
		case stashOpen:
			if r.state.CompareAndSwap(stashOpen, stashClosed) {
				return nil
			}
		case stashFull:
			// Closed, the stash is the runner's alone: pushers need it
			// open, the clock needs it full.
			if r.state.CompareAndSwap(stashFull, stashClosed) {
				t := r.next
				r.next = nil
				return t
			}
		default: // filling: a pusher or the clock is at it for a moment
			runtime.Gosched()
		}
	}
}

// offer stashes t, which the caller has claimed (set running); false means
// the stash is not open and the caller must start t itself.
func (r *runner) offer(t runnable) bool {
	if !r.state.CompareAndSwap(stashOpen, stashFilling) {
		return false
	}
	// Registered before the stash is full, so the runner (which waits
	// while the stash is filling) cannot exit unregistered meanwhile.
	if !r.registered.Load() {
		r.registered.Store(true)
		r.h.AddStasher(r)
	}
	r.next = t
	r.tick = r.h.TickCount()
	r.state.Store(stashFull)
	return true
}

// Unstash implements host.Stasher: the clock starts a cell that has waited
// in the stash since before the previous tick, on a goroutine of its own.
func (r *runner) Unstash(now uint64) {
	if r.state.Load() != stashFull || !r.state.CompareAndSwap(stashFull, stashFilling) {
		return
	}
	if r.tick+1 >= now {
		r.state.Store(stashFull)
		return
	}
	r.spawnStashed()
}

// flush starts the cell in the stash, if any, on a goroutine of its own:
// the handler that stashed it is about to block (it asks, or waits for
// mailbox room), maybe on that very cell.
func (r *runner) flush() {
	if r.state.Load() == stashFull && r.state.CompareAndSwap(stashFull, stashFilling) {
		r.spawnStashed()
	}
}

// spawnStashed starts the stashed cell; the caller moved the stash from
// full to filling. The handler still runs, so the stash opens again.
func (r *runner) spawnStashed() {
	t := r.next
	r.next = nil
	r.state.Store(stashOpen)
	r.h.Enter()
	go t.loop()
}

// noteIdlePeer records, for the runner whose handler's Context ctx is,
// that the last handler of a batch told a cell whose goroutine waited
// idle (parked or yielding). Two cells bouncing messages end up so when
// one of them got a goroutine of its own (the clock started it, or its
// teller had more mail): neither is idle when the other tells it, so
// neither hands off, and both goroutines yield between messages. The
// runner then lets its cell go idle at once after the handler instead of
// waiting, and the answer hands off again.
func noteIdlePeer(ctx context.Context) {
	if rc, ok := ctx.(runnerCarrier); ok {
		if r := rc.handoffRunner(); r != nil && r.state.Load() == stashOpen && !r.idlePeer.Load() {
			r.idlePeer.Store(true)
		}
	}
}

// flushStash flushes the stash of the runner whose handler's Context ctx
// is, if it is one.
func flushStash(ctx context.Context) {
	if rc, ok := ctx.(runnerCarrier); ok {
		if r := rc.handoffRunner(); r != nil {
			r.flush()
		}
	}
}

// exit ends the runner; its goroutine is about to return.
func (r *runner) exit() {
	for _, x := range r.ls {
		if x != nil {
			x.(unlinker).unlink(r)
		}
	}
	if r.registered.Load() {
		r.h.RemoveStasher(r)
	}
}

// unlinker is a loop state, which a runner drops.
type unlinker interface{ unlink(r *runner) }

// unlink unlinks the cell from r if r was the last to run it: a cell that
// handed off keeps its runner (saving two atomic writes per hand-off)
// until the runner drops the cell's loop state.
func (ls *loopState[S, M, C]) unlink(r *runner) {
	c := ls.ctx.cell
	c.run.CompareAndSwap(r, nil)
	c.k.recycle(ls.work)
	ls.work = nil
}

// handoffRunner is the runner of the handler whose Context this is: the
// runner that runs or last ran its cell, or nil. It marks the cell as one
// that tells: the stash opens only for those, so actors that never tell
// from their handlers pay nothing for it.
func (b *Base) handoffRunner() *runner {
	if !b.tells.Load() {
		b.tells.Store(true)
	}
	return b.run.Load()
}

type runnerCarrier interface{ handoffRunner() *runner }

// handOff stashes c, which the caller has claimed, in the runner of the
// handler that tells it through ctx; false means c needs a goroutine.
func (c *cell[S, M, C]) handOff(ctx context.Context) bool {
	rc, ok := ctx.(runnerCarrier)
	if !ok {
		return false
	}
	r := rc.handoffRunner()
	return r != nil && r.h == c.k.h && r.offer(c)
}

// loopState is what a runner keeps per cell it runs: the handler's Context
// and the spare mailbox buffer that the cell's mailbox swaps with.
type loopState[S, M, C any] struct {
	ctx  Context[S, M, C]
	work []envelope[M]
	one  [1]envelope[M] // the batch of an inline run (inline.go)
}

// stateOn returns c's loop state on r, making one if r has none.
func (c *cell[S, M, C]) stateOn(r *runner) *loopState[S, M, C] {
	for _, x := range r.ls {
		if ls, ok := x.(*loopState[S, M, C]); ok && ls.ctx.cell == c {
			return ls
		}
	}
	ls := &loopState[S, M, C]{}
	ls.ctx.setCell(c)
	ls.ctx.user = c.k.def.Wrap(&ls.ctx)
	if old := r.ls[r.victim]; old != nil {
		old.(unlinker).unlink(r)
	}
	r.ls[r.victim] = ls
	r.victim = (r.victim + 1) % len(r.ls)
	return ls
}

// loopRoot is a new runner goroutine's state, allocated at once.
type loopRoot[S, M, C any] struct {
	r  runner
	ls loopState[S, M, C]
}

// loop is the body of a goroutine that runs c and then the cells handed
// off to it.
func (c *cell[S, M, C]) loop() {
	h := c.k.h
	defer h.Leave()
	// A cold cell (see warm) is most likely a one-off activation: it runs
	// without a runner, as cheap to start as can be, and hands off nothing
	// unless it gets more mail.
	// exitTick is safe to read unlocked: only the cell's goroutine, which
	// this is now, writes it.
	if !c.warm() {
		ls := c.k.coldState(c)
		t := c.runWith(nil, ls)
		c.k.putCold(ls)
		if t == nil {
			return
		}
	}
	root := &loopRoot[S, M, C]{r: runner{h: h}}
	root.ls.ctx.setCell(c)
	root.ls.ctx.user = c.k.def.Wrap(&root.ls.ctx)
	r := &root.r
	r.ls[0], r.victim = &root.ls, 1
	var t runnable = c
	for t != nil {
		t = t.runOn(r)
	}
	r.exit()
}

// coldState returns a loop state for a cold start of c. Cold starts are
// mostly one-off activations: their states are reused through k.cold
// rather than allocated per activation (a quarter of an activation's
// bytes, all garbage a moment later). A Context is valid only inside its
// handler call, so a state can serve another cell once the run ended.
func (k *kind[S, M, C]) coldState(c *cell[S, M, C]) *loopState[S, M, C] {
	ls, _ := k.cold.Get().(*loopState[S, M, C])
	if ls == nil {
		ls = &loopState[S, M, C]{}
		ls.ctx.user = k.def.Wrap(&ls.ctx)
	}
	ls.ctx.setCell(c)
	return ls
}

// putCold returns the state of an ended cold run to k.cold, holding
// nothing of its cell: its mailbox buffer stays behind as garbage (kept,
// the next cell's idle mailbox would hold it), its Context is zeroed.
func (k *kind[S, M, C]) putCold(ls *loopState[S, M, C]) {
	k.recycle(ls.work)
	user := ls.ctx.user // wraps &ls.ctx: stays valid for the next run
	*ls = loopState[S, M, C]{}
	ls.ctx.user = user
	k.cold.Put(ls)
}
