// Package host holds the untyped services one actor system shares between
// all of its actor types: the registry of types, counters, the observer,
// the linger clock and the shutdown sequence. The typed machinery lives in
// package runtime; package system builds a Host from its Config. Nothing
// outside this module can import it.
package host

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/replication"
)

// EventKind names what an Event reports.
type EventKind uint8

// The events a Host reports to its observer.
const (
	ActivationStarted EventKind = iota + 1
	ActivationEnded
	ActivationFailed
	MessageDropped
	MailboxFull
)

// Event is one observation about an actor.
type Event struct {
	Kind   EventKind
	Type   string
	Key    string
	Reason string
	Err    error
}

// Kind is the runtime side of one registered actor definition.
type Kind interface {
	Name() string
	// Sweep is called every linger tick; it passivates activations idle
	// for their timeout, scanning at most every quarter of it.
	Sweep(now time.Time)
	// Deepest reports the longest mailbox of this type.
	Deepest() int
	// Stop begins shutdown: timers stop, queued work drains.
	Stop()
	// Abort cancels running handlers and fails what is still queued.
	Abort()
	// Queued reports the messages waiting in this type's mailboxes.
	Queued() int
	// Activations returns the keys activated here, idle ones included.
	// Like Host.Active it counts an activation until it has ended. It
	// locks each shard in turn: for reports, not the message path.
	Activations() int
}

// Stasher is a goroutine of the runtime that may hold an actor it was
// handed to run after its current handler (a direct hand-off). The clock
// calls Unstash on every tick with the tick count, so that an actor
// stashed behind a handler that blocks or runs long still starts soon.
type Stasher interface {
	Unstash(tick uint64)
}

// Settings are the defaults a Host applies to every actor type.
type Settings struct {
	Logger      *slog.Logger
	Observer    func(Event)
	IdleTimeout time.Duration
	AskTimeout  time.Duration
	BackoffMin  time.Duration
	BackoffMax  time.Duration
	// Linger is how long an actor's goroutine waits for more work
	// before it exits and leaves the actor idle.
	Linger time.Duration
	// Remote, when set, places keys on cluster members and carries the
	// messages of keys served elsewhere. Nil: everything is local.
	Remote Remote
	// Member is the address of the cluster member this host runs on, as
	// handlers and failures name it; "" for a standalone system or a
	// client.
	Member string
	// MaxMessage bounds a message's encoded size, in bytes, in a
	// clustered host (member or client); 0: no bound.
	MaxMessage int
	// RemoteOnly marks a host that serves no keys (a client): it
	// registers a definition's runtime when a ref of it is first taken.
	RemoteOnly bool
	// Store keeps the state of durable and replicated actor types; nil
	// when the system hosts none.
	Store Store
	// Strict admits the messages of every durable kind as Spec.Strict
	// does.
	Strict bool
	// Meter, if set, returns the meter of an actor type, called once per
	// type as it is registered; nil: messages are not counted.
	Meter func(typ string) *TypeMeter
	// Tracer, if set, is called around each message a handler handles
	// (see Tracer); nil: none is, at no cost.
	Tracer Tracer
	// Kept bounds the answers this host's durable kinds keep for keyed
	// asks; zero fields take the defaults.
	Kept replication.KeptAnswers
}

// registry is an immutable snapshot of the registered kinds.
type registry struct {
	byName map[string]Kind
	order  []Kind
}

// Host is shared by every actor type of one system.
type Host struct {
	Settings

	closed   atomic.Bool
	hardCtx  context.Context // done when Close's deadline passed
	hardStop context.CancelFunc

	mu  sync.Mutex // serialises Register
	reg atomic.Pointer[registry]

	// goroutine accounting for Close: a counter, not a WaitGroup, because
	// timers may start goroutines while Close already waits.
	gmu     sync.Mutex
	running int
	idle    chan struct{} // closed when running drops to zero during close

	tickMu sync.Mutex
	tick   chan struct{}
	tickN  atomic.Uint64

	clockDone chan struct{}
	clockStop chan struct{}

	timers sync.Pool // stopped *time.Timer, reused by asks

	stashMu  sync.Mutex
	stashers map[Stasher]struct{}

	unknownMu sync.Mutex
	unknown   map[string]any // see Unknown

	// reqPrefix and reqCount make request ids (see NewRequestID).
	reqPrefix uint64
	reqCount  atomic.Uint64

	kept *keptLedger

	Active   atomic.Int64
	AsksOut  atomic.Int64
	Restarts atomic.Int64
	// Activated counts the keys activated since the host started: a
	// cell's creation, not a message's delivery.
	Activated atomic.Uint64
}

// New returns a running Host. Call Stop and Wait to end it.
func New(s Settings) *Host {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{
		Settings:  s,
		tick:      make(chan struct{}),
		clockDone: make(chan struct{}),
		clockStop: make(chan struct{}),
		reqPrefix: newRequestPrefix(),
	}
	h.hardCtx, h.hardStop = context.WithCancel(context.Background())
	h.Kept = s.Kept.WithDefaults()
	h.kept = newKeptLedger(h.Kept, h.Kind)
	go h.clock()
	return h
}

// Register adds a kind; it reports false when the name is taken. Kinds
// are registered while the system starts; lookups are lock-free.
func (h *Host) Register(k Kind) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.reg.Load()
	if old != nil {
		if _, dup := old.byName[k.Name()]; dup {
			return false
		}
	}
	next := &registry{byName: make(map[string]Kind)}
	if old != nil {
		for n, v := range old.byName {
			next.byName[n] = v
		}
		next.order = append(next.order, old.order...)
	}
	next.byName[k.Name()] = k
	next.order = append(next.order, k)
	h.reg.Store(next)
	return true
}

// Unknown returns the value kept for typ, a type name this host does not
// host, made by mk on first use: the refs of such a type taken in one
// system share it, so that they compare equal.
func (h *Host) Unknown(typ string, mk func() any) any {
	h.unknownMu.Lock()
	defer h.unknownMu.Unlock()
	v, ok := h.unknown[typ]
	if !ok {
		if h.unknown == nil {
			h.unknown = make(map[string]any)
		}
		v = mk()
		h.unknown[typ] = v
	}
	return v
}

// NoteKept counts the answers typ/key keeps for keyed asks, after a
// commit wrote them or an activation loaded them: answers that are not
// pending, their bytes at every copy, and the oldest one's time (Unix
// nanoseconds). No answers forgets the key. Past the host's bounds
// (Settings.Kept) the keys holding the oldest answers are asked to drop
// them (see KeptPruner), and so are those whose oldest answer outlived
// its Retain.
func (h *Host) NoteKept(typ, key string, answers int, bytes, oldest int64) {
	h.kept.note(typ, key, answers, bytes, oldest)
}

// KeptUsage returns the answers and bytes the host's ledger of kept
// answers counts.
func (h *Host) KeptUsage() (answers int, bytes int64) { return h.kept.usage() }

// Kind returns the registered kind with that name, or nil.
func (h *Host) Kind(name string) Kind {
	if r := h.reg.Load(); r != nil {
		return r.byName[name]
	}
	return nil
}

// Kinds returns every registered kind in registration order; the caller
// must not modify the slice.
func (h *Host) Kinds() []Kind {
	if r := h.reg.Load(); r != nil {
		return r.order
	}
	return nil
}

// Timer returns a timer that fires after d; give it back with PutTimer.
// Asks without a deadline use one each, so reusing them saves two
// allocations per ask.
func (h *Host) Timer(d time.Duration) *time.Timer {
	if t, ok := h.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// PutTimer stops t and keeps it for reuse. Since Go 1.23 a stopped
// timer's channel holds no stale tick, so a reused timer is clean.
func (h *Host) PutTimer(t *time.Timer) {
	t.Stop()
	h.timers.Put(t)
}

// AddStasher makes the clock watch s until RemoveStasher.
func (h *Host) AddStasher(s Stasher) {
	h.stashMu.Lock()
	if h.stashers == nil {
		h.stashers = make(map[Stasher]struct{})
	}
	h.stashers[s] = struct{}{}
	h.stashMu.Unlock()
}

// RemoveStasher is the counterpart of AddStasher.
func (h *Host) RemoveStasher(s Stasher) {
	h.stashMu.Lock()
	delete(h.stashers, s)
	h.stashMu.Unlock()
}

func (h *Host) unstash() {
	n := h.tickN.Load()
	h.stashMu.Lock()
	for s := range h.stashers {
		s.Unstash(n)
	}
	h.stashMu.Unlock()
}

// Closed reports whether the host refuses new work.
func (h *Host) Closed() bool { return h.closed.Load() }

// HardStop is closed when Close's deadline passed and handlers must stop.
func (h *Host) HardStop() <-chan struct{} { return h.hardCtx.Done() }

// HardCtx is a context that ends when HardStop closes: handlers' contexts
// derive from it, so that contexts a handler derives attach to a context
// of package context (no goroutine of theirs reads the handler's Context
// after it returned).
func (h *Host) HardCtx() context.Context { return h.hardCtx }

// Emit sends an event to the observer, if any.
func (h *Host) Emit(e Event) {
	if h.Observer != nil {
		h.Observer(e)
	}
}

// Enter accounts for a goroutine the runtime starts; Close waits until
// every Enter has its Leave.
func (h *Host) Enter() {
	h.gmu.Lock()
	h.running++
	h.gmu.Unlock()
}

// Leave is the counterpart of Enter.
func (h *Host) Leave() {
	h.gmu.Lock()
	h.running--
	if h.running == 0 && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
	h.gmu.Unlock()
}

// Tick returns the channel the next linger tick closes, and the number of
// the tick that closes it.
func (h *Host) Tick() (<-chan struct{}, uint64) {
	h.tickMu.Lock()
	c := h.tick
	h.tickMu.Unlock()
	return c, h.tickN.Load()
}

// TickCount is the number of linger ticks so far.
func (h *Host) TickCount() uint64 { return h.tickN.Load() }

func (h *Host) clock() {
	defer close(h.clockDone)
	period := h.Linger
	if period <= 0 {
		period = 10 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-h.clockStop:
			h.advance()
			return
		case now := <-t.C:
			h.advance()
			h.unstash()
			h.maybeSweep(now)
		}
	}
}

func (h *Host) advance() {
	h.tickMu.Lock()
	old := h.tick
	h.tick = make(chan struct{})
	h.tickN.Add(1)
	h.tickMu.Unlock()
	close(old)
}

func (h *Host) maybeSweep(now time.Time) {
	for _, k := range h.Kinds() {
		k.Sweep(now)
	}
}

// Close refuses new work, lets activations drain until ctx ends, then
// cancels what still runs. It waits for every goroutine the runtime
// started; it returns ctx's error if handlers outlived the deadline and
// the grace after cancellation.
func (h *Host) Close(ctx context.Context) error {
	if h.closed.Swap(true) {
		<-h.clockDone
		return nil
	}
	h.kept.close() // before the kinds stop: it queues no work past here
	for _, k := range h.Kinds() {
		k.Stop()
	}
	h.advance() // wake lingering goroutines so they see the close
	err := h.waitIdle(ctx)
	if err != nil {
		h.hardStop()
		for _, k := range h.Kinds() {
			k.Abort()
		}
		// Cancelled handlers get a short grace to return.
		grace, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = h.waitIdle(grace)
		cancel()
		err = fmt.Errorf("troupe: close cut work short: %w", err)
	}
	h.hardStop()
	close(h.clockStop)
	<-h.clockDone
	return err
}

func (h *Host) waitIdle(ctx context.Context) error {
	h.gmu.Lock()
	if h.running == 0 {
		h.gmu.Unlock()
		return nil
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.gmu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
