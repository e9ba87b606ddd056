package actor

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Handler handles one message for one key. It runs alone: never
// concurrently with itself for the same key. Returning an error, or
// panicking, fails the message: an asker receives ErrActorFailed and the
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

// WriteLevel is how many replicas acknowledge a state write (used by
// replicated definitions; accepted and validated now).
type WriteLevel uint8

// Write levels.
const (
	WriteOne WriteLevel = iota + 1
	WriteQuorum
	WriteAll
)

// Default option values.
const (
	DefaultMailbox     = 1024
	DefaultIdleTimeout = time.Minute
	DefaultAskTimeout  = 10 * time.Second
	DefaultBackoffMin  = 100 * time.Millisecond
	DefaultBackoffMax  = 10 * time.Second
	// MaxReplicas bounds Replicas.
	MaxReplicas = 7
)

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

// WithIdleTimeout passivates a key after d without messages, timers or a
// running body (default 1 minute).
func WithIdleTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d <= 0 {
			s.problem("WithIdleTimeout", "%v must be positive", d)
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

// WithReplicas keeps n copies of each key's state in a cluster (1..7).
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

// Pinned ties each key to the member named in its ref, bypassing the ring.
func Pinned() Option { return func(s *settings) { s.pinned = true } }

// Durable keeps each key's state in local durable storage.
func Durable() Option { return func(s *settings) { s.durable = true } }

// Def is an actor type: a stable name, a state type S, a message type M
// (usually a sealed interface) and a handler. Declare it once, at package
// scope, and register it with every system that hosts it.
type Def[S, M any] struct {
	name    string
	handler Handler[S, M]
	init    func(key string) S
	run     RunFunc[M]
	s       settings
	err     error
	codec   *codec
}

// Define declares an actor type. Problems with the definition are kept and
// reported, naming the definition and the field, when a system registers
// it (see Err).
func Define[S, M any](name string, handler Handler[S, M], opts ...Option) *Def[S, M] {
	d := &Def[S, M]{name: name, handler: handler, codec: newCodec[M]()}
	d.s = settings{
		mailbox: DefaultMailbox, idle: DefaultIdleTimeout, askTimeout: DefaultAskTimeout,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, replicas: 1, write: WriteQuorum,
	}
	for _, o := range opts {
		o(&d.s)
	}
	d.err = d.validate()
	return d
}

// WithInit sets how a key's state starts (default: the zero S). It returns
// d so it can follow Define in a package-scope declaration.
func (d *Def[S, M]) WithInit(f func(key string) S) *Def[S, M] {
	d.init = f
	return d
}

// WithRun makes the actor proactive: body runs while a key is active.
func (d *Def[S, M]) WithRun(body RunFunc[M]) *Def[S, M] {
	d.run = body
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
	if probs := d.codec.register(d.name, vals); len(probs) > 0 {
		d.s.problems = append(d.s.problems, probs...)
		d.err = d.validate()
	}
	return d
}

// ClusterErr reports why the definition cannot be hosted by a clustered
// system, where its messages cross nodes: Err's problems, or an interface
// message type without WithMessages.
func (d *Def[S, M]) ClusterErr() error {
	if d.err != nil {
		return d.err
	}
	if err := d.codec.portable(); err != nil {
		return &DefinitionError{Definition: d.name, Field: "WithMessages", Problem: err.Error()}
	}
	return nil
}

// Name is the actor type's stable name.
func (d *Def[S, M]) Name() string { return d.name }

// Err reports why the definition cannot be hosted, or nil.
func (d *Def[S, M]) Err() error { return d.err }

func (d *Def[S, M]) validate() error {
	var probs []*DefinitionError
	if d.name == "" {
		probs = append(probs, &DefinitionError{Field: "name", Problem: "must not be empty"})
	} else if strings.ContainsAny(d.name, "/\x00") || strings.TrimSpace(d.name) != d.name {
		probs = append(probs, &DefinitionError{Field: "name", Problem: "must not contain '/', NUL or surrounding spaces"})
	}
	if d.handler == nil {
		probs = append(probs, &DefinitionError{Field: "handler", Problem: "must not be nil"})
	}
	probs = append(probs, d.s.problems...)
	if d.s.pinned && d.s.replicasSet && d.s.replicas > 1 {
		probs = append(probs, &DefinitionError{Field: "Pinned", Problem: "a pinned actor has exactly one copy; drop WithReplicas"})
	}
	if field, typ := unencodable(reflect.TypeFor[S](), "state", map[reflect.Type]bool{}); field != "" {
		probs = append(probs, &DefinitionError{Field: field, Problem: fmt.Sprintf("type %s cannot be encoded", typ)})
	}
	if len(probs) == 0 {
		return nil
	}
	for _, p := range probs {
		p.Definition = d.name
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

// unencodable returns the path and type of the first part of t that the
// state codec cannot carry: functions, channels and unsafe pointers.
func unencodable(t reflect.Type, path string, seen map[reflect.Type]bool) (string, reflect.Type) {
	if seen[t] {
		return "", nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return path, t
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unencodable(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p, bad := unencodable(t.Key(), path+"{key}", seen); p != "" {
			return p, bad
		}
		return unencodable(t.Elem(), path+"{}", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			if p, bad := unencodable(f.Type, path+"."+f.Name, seen); p != "" {
				return p, bad
			}
		}
	}
	return "", nil
}
