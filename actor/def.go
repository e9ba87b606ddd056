package actor

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/replication"
)

// Handler handles one message for one key. It runs alone: never
// concurrently with itself for the same key. Returning an error the
// definition declares (WithErrors) answers an ask with that error: no
// failure, no restart. Returning any other error, or panicking, fails the
// message: an asker receives a *FailedError (ErrActorFailed) and the
// activation restarts after backoff from its last saved state.
type Handler[S, M any] func(c *Context[S, M], msg M) error

// RunFunc is the body of a proactive actor: it runs in its own goroutine
// while the key is active, until ctx ends (release, passivation, close).
// It talks to its actor through self, like any other sender. An error or a
// panic restarts it after backoff.
type RunFunc[M any] func(ctx context.Context, self Ref[M]) error

// Overflow says what a send does when the mailbox is at its bound.
type Overflow uint8

const (
	// Refuse makes Tell and Ask fail at once with ErrMailboxFull.
	Refuse Overflow = iota
	// Wait makes the sender wait for room until its context ends.
	Wait
)

func (o Overflow) String() string {
	switch o {
	case Refuse:
		return "refuse"
	case Wait:
		return "wait"
	}
	return fmt.Sprintf("Overflow(%d)", uint8(o))
}

// WriteLevel is how many of a key's replicas must hold a state write
// before the handler's outputs leave (see WithReplicas).
type WriteLevel uint8

// Write levels.
const (
	// WriteOne needs the owner's own copy only: fast, but a write it
	// acknowledged is lost if the owner's store is, and a fenced owner is
	// not kept from answering.
	WriteOne WriteLevel = iota + 1
	// WriteMajority needs n/2+1 of the n replicas (the default): any two
	// majorities share a replica, so an acknowledged write survives the
	// loss of a minority and a newer owner fences an older one.
	WriteMajority
	// WriteAll needs every replica: a single replica down blocks writes.
	WriteAll
)

// level maps a write level to the replication driver's.
func (l WriteLevel) level() replication.Level {
	switch l {
	case WriteOne:
		return replication.One
	case WriteAll:
		return replication.All
	}
	return replication.Majority
}

// Default option values.
const (
	DefaultMailbox     = 1024
	DefaultIdleTimeout = time.Minute
	DefaultAskTimeout  = 10 * time.Second
	DefaultBackoffMin  = 100 * time.Millisecond
	DefaultBackoffMax  = 10 * time.Second
	// MaxReplicas bounds Replicas.
	MaxReplicas = 7
	// DefaultMaxMessage is the default message limit of a clustered
	// system or client (system.Config.MaxMessage, client.Config.MaxMessage),
	// in encoded bytes: 16 MiB.
	DefaultMaxMessage = 16 << 20
	// MaxMessageLimit is the largest message limit a clustered system or
	// client accepts, in encoded bytes: 1 GiB.
	MaxMessageLimit = 1 << 30
)

// Never, given to WithIdleTimeout (or as system.Config.IdleTimeout),
// keeps a key's activation until it is released, moves, fails to restart
// or the system closes: it never passivates for being idle.
const Never time.Duration = -1

// Option configures a definition.
type Option func(*settings)

type settings struct {
	mailbox     int
	overflow    Overflow
	idle        time.Duration
	askTimeout  time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	replicas    int
	write       WriteLevel
	pinned      bool
	durable     bool
	strict      bool
	errors      []error
	problems    []*DefinitionError
	mailboxSet  bool
	replicasSet bool
	// set by the options, so a system's defaults apply only to the
	// settings a definition left alone (even when it set the default).
	idleSet, askSet, backoffSet bool
}

func (s *settings) problem(field, format string, args ...any) {
	s.problems = append(s.problems, &DefinitionError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// WithMailbox bounds the mailbox to size messages (default 1024) and sets
// what happens when it is full.
func WithMailbox(size int, overflow Overflow) Option {
	return func(s *settings) {
		if size < 1 {
			s.problem("WithMailbox", "size %d must be at least 1", size)
		}
		if overflow != Refuse && overflow != Wait {
			s.problem("WithMailbox", "unknown overflow policy %d", overflow)
		}
		s.mailbox, s.overflow, s.mailboxSet = size, overflow, true
	}
}

// WithIdleTimeout passivates a key after d without messages, timers (but
// a durable key's, which wake it when due) or a running body (default 1
// minute); Never keeps it active. Passivation ends
// the activation: the state of a definition neither Durable nor
// replicated is dropped, and the key's next message starts from WithInit's
// state; a durable key's next message starts from its stored state.
func WithIdleTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 && d != Never {
			s.problem("WithIdleTimeout", "%v must be positive, or Never", d)
		}
		s.idle, s.idleSet = d, true
	}
}

// WithAskTimeout bounds asks whose context has no deadline (default 10 s).
func WithAskTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 {
			s.problem("WithAskTimeout", "%v must be positive", d)
		}
		s.askTimeout, s.askSet = d, true
	}
}

// WithBackoff sets the restart delay after a failure: min, doubling per
// consecutive failure up to max (defaults 100 ms and 10 s).
func WithBackoff(min, max time.Duration) Option {
	return func(s *settings) {
		if min <= 0 || max < min {
			s.problem("WithBackoff", "need 0 < min <= max, got %v and %v", min, max)
		}
		s.backoffMin, s.backoffMax, s.backoffSet = min, max, true
	}
}

// WithReplicas keeps n copies (1..7) of each key's state in a cluster,
// the owner's included, on the first n distinct members clockwise from the
// key on the ring (dead members count until the cluster removes them;
// fewer copies when the ring has fewer members), and writes each state
// change at level (WriteMajority by default) before the handler's outputs
// leave. With n > 1 the definition is Durable, and only a key's replica
// set serves it: the first live replica in ring order owns it, a key whose
// owner leaves, dies or changes continues on the next from the state its
// replicas hold, and when all n are down, sends fail with ErrUnavailable.
// With n = 1 (the default) any live member may take a key: the first in
// ring order hosting the type. A Pinned definition refuses n > 1. A
// standalone system keeps one copy, its own.
func WithReplicas(n int, level WriteLevel) Option {
	return func(s *settings) {
		if n < 1 || n > MaxReplicas {
			s.problem("WithReplicas", "%d replicas: want 1..%d", n, MaxReplicas)
		}
		if level < WriteOne || level > WriteAll {
			s.problem("WithReplicas", "unknown write level %d", level)
		}
		s.replicas, s.write, s.replicasSet = n, level, true
	}
}

// WithErrors declares the errors the handler may answer an ask with:
// sentinels by value (ErrInsufficientFunds) and error types by a nil
// pointer of the type ((*InsufficientFundsError)(nil)). A declared error
// is an answer, not a failure: the actor does not restart, and the asker
// gets the error itself, on every path. Across nodes a sentinel is known
// by its text and a type by its Go name (package.Type), its value carried
// as msgpack, as for messages: keep both stable. An error that wraps a
// declared one (fmt.Errorf("...: %w", ErrX)) counts as declared: the
// first declared error, in the order given, found by errors.Is or
// errors.As travels with the wrapper's text. The runtime's own errors
// (this package's sentinels, *PanicError, *FailedError, *CycleError,
// *DefinitionError) cannot be declared: the definition reports a
// *DefinitionError naming WithErrors. A panic stays a failure, and so does
// a *FailedError a handler passes on, whatever it wraps.
func WithErrors(errs ...error) Option {
	return func(s *settings) { s.errors = append(s.errors, errs...) }
}

// Pinned ties each key to the member named in its ref, bypassing the ring.
func Pinned() Option { return func(s *settings) { s.pinned = true } }

// Durable keeps each key's state, and the timers it set, in the node's
// store (system.Config.DataDir, or memory without one): it survives
// passivation, a restart of the activation, and with a DataDir a restart
// of the process. A key's first message acquires it and reads its stored
// state (WithInit's when there is none). Each message's changes are
// written before its handler's outputs (tells, asks, pipes, the reply)
// leave and at its end, as WithReplicas describes; a state that cannot be
// written ends the activation and fails the ask with ErrUnavailable (the
// write may or may not have happened). A stored state that no longer
// decodes (its type changed) fails the activation with a *StateError and is
// left as it is. Without WithReplicas(n > 1) the one copy is on the member
// that owns the key, so a key that moves to another member starts there
// from what that member stored, if anything; a Pinned durable actor
// restarts on its member from its stored state. The definition's messages
// must be encodable (WithMessages for an interface M): its timers are
// stored with its state.
func Durable() Option { return func(s *settings) { s.durable = true } }

// StrictDurability admits each message of a Durable or replicated actor
// only once its key's write level is met for it, before the handler runs:
// a message that cannot be admitted (too few replicas answer, or this
// member no longer owns the key) fails with ErrNotAdmitted and does not
// run, rather than run with weaker durability and fail at its commit. A
// keyed ask (WithIdempotencyKey) is admitted by storing its request as
// pending on the replicas; should its owner die or lose the key
// mid-handler, a retry runs the handler again as its next attempt
// (Context.Attempt), and the earlier attempt can no longer store its
// state or answer (what it sent before is not recalled). A keyed ask
// whose handler deferred its reply keeps the reply once given (see
// WithIdempotencyKey); should its owner die before giving it, a retry
// gets ErrOutcomeUnknown. Any other message is admitted by a
// quorum confirming that this member still owns the key. Each admission
// is one more round trip to the replicas (a write for a keyed ask).
//
// The pending request lives where the key's copies do: with
// WithReplicas(n > 1) at Majority or All, on a quorum; WriteOne promises
// no more than the owner's copy and is refused with it. A single copy
// (Durable alone) survives a restart of its member with the same DataDir,
// but not a move of the key to another member. system.Config.
// StrictDurability sets it for every durable definition a system hosts
// (but those written at WriteOne). The members of a cluster run one
// version: the records of keys that keep answers are written in the
// runtime's newest format, which older versions refuse to load.
func StrictDurability() Option { return func(s *settings) { s.strict = true } }

// Def is an actor type: a stable name, a state type S, a message type M
// (usually a sealed interface) and a handler. Declare it once, at package
// scope, and register it with every system that hosts it.
type Def[S, M any] struct {
	sealed
	spec runtime.Spec[S, M, Context[S, M]]
	s    settings
	err  error
}

// sealed, embedded, makes a Def a Definition that only this package can
// make: the runtime instantiates it through the closure Define gives.
type sealed = runtime.Sealed

// Definition is an actor definition a system can host: any *Def.
type Definition interface {
	Name() string
	// Err reports why the definition cannot be hosted, or nil.
	Err() error
	// ClusterErr is Err, plus what stops the definition's messages from
	// crossing nodes.
	ClusterErr() error
	definition
}

type definition = runtime.Definition

// Define declares an actor type. Problems with the definition are kept and
// reported, naming the definition and the field, when a system registers
// it (see Err).
func Define[S, M any](name string, handler Handler[S, M], opts ...Option) *Def[S, M] {
	d := &Def[S, M]{}
	d.s = settings{
		mailbox: DefaultMailbox, idle: DefaultIdleTimeout, askTimeout: DefaultAskTimeout,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, replicas: 1, write: WriteMajority,
	}
	for _, o := range opts {
		o(&d.s)
	}
	d.spec = runtime.Spec[S, M, Context[S, M]]{
		Name: name, Handler: runtime.Handler[S, M, Context[S, M]](handler),
		Wrap:    func(rc *runtime.Context[S, M, Context[S, M]]) Context[S, M] { return Context[S, M]{&rc.Base, rc} },
		Mailbox: d.s.mailbox, Refuse: d.s.overflow == Refuse,
		Idle: d.s.idle, AskTimeout: d.s.askTimeout, BackoffMin: d.s.backoffMin, BackoffMax: d.s.backoffMax,
		IdleSet: d.s.idleSet, AskSet: d.s.askSet, BackoffSet: d.s.backoffSet,
		Pinned: d.s.pinned, Replicas: d.s.replicas, Codec: codec.New[M](),
		Durable: d.s.durable || d.s.replicas > 1, Level: d.s.write.level(), Strict: d.s.strict,
		StateFailed: func(key string, err error) error {
			return &StateError{Definition: name, Key: key, Err: err}
		},
		Panicked: func(v any, stack []byte) error { return &PanicError{Value: v, Stack: stack} },
		Errors:   &codec.Errors{},
	}
	for _, p := range d.spec.Errors.Register(name, d.s.errors) {
		d.s.problems = append(d.s.problems, &DefinitionError{Definition: p.Definition, Field: p.Field, Problem: p.Problem})
	}
	d.sealed = runtime.Seal(func(h *host.Host) host.Kind { return runtime.NewKind(h, &d.spec) },
		runtime.Storage{Durable: d.spec.Durable, Replicas: d.spec.Replicas, Level: d.spec.Level, Pinned: d.spec.Pinned})
	d.err = d.validate()
	return d
}

// WithInit sets how a key's state starts (default: the zero S). It returns
// d so it can follow Define in a package-scope declaration.
func (d *Def[S, M]) WithInit(f func(key string) S) *Def[S, M] {
	d.spec.Init = f
	return d
}

// WithRun makes the actor proactive: body runs while a key is active.
func (d *Def[S, M]) WithRun(body RunFunc[M]) *Def[S, M] {
	d.spec.Run = nil
	if body != nil {
		d.spec.Run = func(ctx context.Context, self runtime.Ref[M]) error { return body(ctx, Ref[M]{self}) }
	}
	return d
}

// WithMessages lists the concrete types of the definition's messages (the
// types implementing M), so that other nodes of a cluster can decode them.
// Each type is known by its Go name (package.Type): keep names stable
// across versions, and add fields rather than rename them. A definition
// whose M is itself a concrete type needs no list. It returns d so it can
// follow Define in a package-scope declaration.
func (d *Def[S, M]) WithMessages(msgs ...M) *Def[S, M] {
	vals := make([]any, len(msgs))
	for i, m := range msgs {
		vals[i] = m
	}
	if probs := d.spec.Codec.Register(d.spec.Name, vals); len(probs) > 0 {
		for _, p := range probs {
			d.s.problems = append(d.s.problems, &DefinitionError{Definition: p.Definition, Field: p.Field, Problem: p.Problem})
		}
		d.err = d.validate()
	}
	return d
}

// ClusterErr reports why the definition cannot be hosted by a clustered
// system, where its messages cross nodes: Err's problems, or an interface
// message type without WithMessages.
func (d *Def[S, M]) ClusterErr() error {
	if err := d.Err(); err != nil {
		return err
	}
	if err := d.spec.Codec.Portable(); err != nil {
		return &DefinitionError{Definition: d.spec.Name, Field: "WithMessages", Problem: err.Error()}
	}
	return nil
}

// Name is the actor type's stable name.
func (d *Def[S, M]) Name() string { return d.spec.Name }

// Err reports why the definition cannot be hosted, or nil.
func (d *Def[S, M]) Err() error {
	if d.err == nil && d.spec.Durable {
		// Checked here, not in Define: WithMessages follows Define.
		if err := d.spec.Codec.Portable(); err != nil {
			return &DefinitionError{Definition: d.spec.Name, Field: "WithMessages", Problem: "a durable actor stores its timers' messages: " + err.Error()}
		}
	}
	return d.err
}

func (d *Def[S, M]) validate() error {
	var probs []*DefinitionError
	if d.spec.Name == "" {
		probs = append(probs, &DefinitionError{Field: "name", Problem: "must not be empty"})
	} else if strings.ContainsAny(d.spec.Name, "/\x00") || strings.TrimSpace(d.spec.Name) != d.spec.Name {
		probs = append(probs, &DefinitionError{Field: "name", Problem: "must not contain '/', NUL or surrounding spaces"})
	}
	if d.spec.Handler == nil {
		probs = append(probs, &DefinitionError{Field: "handler", Problem: "must not be nil"})
	}
	probs = append(probs, d.s.problems...)
	if d.s.pinned && d.s.replicasSet && d.s.replicas > 1 {
		probs = append(probs, &DefinitionError{Field: "Pinned", Problem: "a pinned actor has exactly one copy; drop WithReplicas"})
	}
	if d.s.strict && !d.spec.Durable {
		probs = append(probs, &DefinitionError{Field: "StrictDurability", Problem: "only a Durable or replicated actor keeps what admission needs"})
	}
	if d.s.strict && d.s.replicas > 1 && d.s.write == WriteOne {
		probs = append(probs, &DefinitionError{Field: "StrictDurability", Problem: "WriteOne keeps an admitted request on the owner alone: use WriteMajority or WriteAll"})
	}
	if field, typ := codec.Unencodable(reflect.TypeFor[S](), "state"); field != "" {
		probs = append(probs, &DefinitionError{Field: field, Problem: fmt.Sprintf("type %s cannot be encoded", typ)})
	}
	if len(probs) == 0 {
		return nil
	}
	for _, p := range probs {
		p.Definition = d.spec.Name
	}
	if len(probs) == 1 {
		return probs[0]
	}
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = p
	}
	return joinDefErrors(errs)
}

type multiDefError []error

func (m multiDefError) Error() string {
	var b strings.Builder
	for i, e := range m {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}
func (m multiDefError) Unwrap() []error { return m }

func joinDefErrors(errs []error) error { return multiDefError(errs) }
