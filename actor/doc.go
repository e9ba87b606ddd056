// Package actor is the typed API of Troupe: actor definitions, refs,
// Tell, Ask and the handler's Context.
//
// # Definitions
//
// An actor type is declared once, at package scope, with a stable name, a
// state type S, a message type M and a handler:
//
//	type CounterMsg interface{ counterMsg() } // sealed: only this package's types
//
//	type Add struct{ N int }
//	type Get struct{ actor.Reply[CounterMsg, int] } // a request answered with an int
//
//	func (Add) counterMsg() {}
//	func (Get) counterMsg() {}
//
//	var Counter = actor.Define("counter", func(c *actor.Context[int, CounterMsg], m CounterMsg) error {
//		switch m := m.(type) {
//		case Add:
//			c.SetState(c.State() + m.N)
//		case Get:
//			return actor.Respond(c, m, c.State())
//		}
//		return nil
//	}, actor.WithMailbox(1000, actor.Refuse))
//
// The name is the actor's identity across processes and versions: keep it
// stable. Options set the mailbox bound and overflow policy, the idle
// timeout, the ask timeout, the restart backoff and whether the state is
// stored (Durable) or replicated (WithReplicas); WithInit sets each
// key's initial state and WithRun makes the actor proactive. Problems with
// a definition are reported when a system registers it, naming the
// definition and the field.
//
// # Refs and messages
//
// Def.Ref(sys, key) names one key of the type in a system. A Ref is a
// value: comparable, printable (type/key) and encodable inside messages
// and state. Taking a ref activates nothing; the first message does.
//
// Ref.Tell sends without waiting. Ask sends a request and returns its
// reply, typed by the Reply marker the request embeds: Ask(ctx, counter,
// Get{}) returns an int, Respond accepts only an int, and asking an actor
// whose message type is not the request's does not compile. When ctx has no
// deadline the definition's ask timeout applies (default 10 s). An ask
// whose caller stops waiting is dropped if still queued, and cancels the
// handler's Context if running. Ask returns by its deadline on every
// path (local, from a handler, to another member, through a client):
// handlers never run on the asking goroutine, so a handler that blocks
// without watching its Context holds up its own actor, not the asker,
// and a reply it gives after the deadline is dropped.
//
// # Request ids
//
// Every ask carries a request id, for correlation only. The asker may name
// it, WithRequestID(ctx, "checkout-7f3a"): 1 to 64 visible ASCII bytes,
// else Ask fails at once with ErrInvalidRequestID. Otherwise Ask makes one:
// 16 bytes shown as 32 lower-case hex digits, a prefix drawn at random when
// the system or client starts and a count, unique without coordination
// (an atomic add per ask; the id is formatted only when someone reads it).
// The handler reads it with Context.RequestID ("" for a tell or a timer),
// on whichever member or path the ask took. One request, one id: the asks
// and pipes a handler makes with its Context (or a context derived from
// it) carry the id of the ask it handles, unless it names another. The
// asker finds the id in every error of the ask but a declared one (which
// is the handler's answer, as it was): a *FailedError's RequestID, or a
// *RequestError wrapping the rest (unavailable, deadline, too large, ...),
// which errors.Is and errors.As look through; RequestIDOf reads either.
// The runtime's log lines about an ask (its handler's failure or panic)
// carry it as request_id, and so does Context.Logger while handling an
// ask. client/idempotency's middleware names its HTTP request id, so the
// asks of a guarded handler carry it.
//
// # Trace contexts
//
// A tell or an ask carries a W3C trace context (traceparent, tracestate)
// when its context has one: WithTraceContext(ctx, TraceContext{Parent:
// "00-…-…-01"}), or the client/idempotency middleware's, taken from the
// HTTP request's headers. It travels with the message to its handler,
// locally, to another member or from a client, and the handler reads it
// with Context.TraceContext (or TraceContextFrom on its Context); the
// tells, asks and pipes the handler makes with its Context carry it on,
// unless their context attaches another (the zero TraceContext: none).
// A timer's message carries none. An invalid one fails the tell or ask at
// once with ErrInvalidTraceContext; TraceContext.Validate checks a value
// first. Troupe makes no spans: a Tracer (system.Config.Tracer) is
// called around each message a handler handles and gives the handler the
// trace context of its span, so that an OpenTelemetry adapter lives
// outside Troupe. A message without a trace context costs nothing extra
// on the wire, and a system without a Tracer calls none.
//
// # Idempotency keys
//
// A request id correlates; an idempotency key deduplicates. An ask made
// with WithIdempotencyKey(ctx, "pay-7f3a") to a definition that keeps its
// state (Durable, WithReplicas) commits its effect once per key and
// actor: the owner keeps the answer (reply, declared error, failure) in
// the actor's stored record, written by the same commit as the state the
// handler changed and before the answer leaves, so a retry, from the
// caller or from the runtime when the owner died mid-request, gets that
// answer without running the handler, and a retry with another request
// fails with ErrIdempotencyConflict. See WithIdempotencyKey for the rules
// and bounds.
//
// # Handlers and state
//
// One message at a time per key, in the order each sender sent them. The
// Context gives the actor's ref, its state, timers, the system, and a way
// to ask without blocking (Pipe) or to reply later (Defer).
//
// State is a value the runtime keeps for the key. SetState and Update are
// the commit points: after a failure (an undeclared error or a panic) the
// actor restarts, after a backoff, from the state of its last completed
// SetState or Update, with its mailbox kept. A handler must therefore not
// change the state in place: do not write into a map or slice that the
// current state holds, or through a pointer it holds, and then fail, or
// the "saved" state has changed too. Build a new value and set it:
//
//	c.Update(func(s Cart) Cart {
//		s.Items = append(slices.Clip(s.Items), item) // copy on write
//		return s
//	})
//
// maps.Clone and slices.Clone make the copy easy; a state of plain values
// (structs of numbers and strings) needs none. State types must be
// encodable (no funcs or channels): durable and replicated actors store
// and ship them.
//
// # Durable and replicated state
//
// By default a key's state lives in memory for the life of its activation.
// Durable() stores it (and the timers the key set) in the node's store
// (system.Config.DataDir, or memory without one): it survives passivation,
// a restart of the activation and, with a DataDir, of the process; a
// Pinned durable actor restarts on its member from its stored state.
// WithReplicas(n, level) with n > 1 keeps n copies on the first n members
// clockwise from the key on the cluster's ring, so that a key whose owner
// leaves, dies or changes goes on from its state on the next one.
//
// The commit points stay SetState and Update, and output commit holds:
// before anything the handler sends leaves (a Tell given the handler's
// Context, an Ask, a Pipe, the reply) and at the end of each message,
// the state the message changed is written at the definition's write level
// (WriteMajority by default), the handler waiting meanwhile, bounded by its
// asker's deadline (by the ask timeout for tells and timers). An output of
// a message that changed nothing first confirms, once per message, that
// this member still owns the key, so that an owner fenced by a newer one
// sends nothing. If the level is not met the ask fails with ErrUnavailable
// (the write may or may not have happened), later outputs of the message
// fail with it too, and the activation ends: the key's next message
// acquires it again and adopts what its replicas hold. A state whose
// encoding exceeds the store's limit fails with ErrMessageTooLarge and is
// not written. A stored state that no longer decodes (its type changed
// incompatibly: add fields rather than rename them), or a stored timer
// whose message type the definition no longer lists, fails the activation
// with a *StateError and stays stored as it was. Context.Delete ends a key
// for good: a tombstone replaces its state, and its next message starts
// from WithInit's state. Once the tombstone is older than
// system.Config.TombstoneAge (48 h), the member that owns the key erases it
// from every replica, keeping a mark that no older copy can pass.
//
// A timer (After, Every) of a durable key is stored with its state (name,
// when it fires next, period, message) and set again, with what is left of
// its time, when the key is next activated, on whichever member owns it
// then; a timer fires only in the activation that owns the key. The member
// that owns a key with stored timers activates it by itself, with no
// message to it, when the first is due: after its owner died, a change
// moved it, the member restarted, or it passivated (see Passivation).
// A one-shot timer leaves the state with the commit of the message it
// sent: a crash before then sends it again (at least once).
//
// # Failures
//
// A handler answers an ask with an error in two ways, and the definition
// says which is which:
//
//   - A declared error (WithErrors: sentinels by value, error types by a
//     nil pointer of the type) is an answer, a business refusal: the
//     handler returns it (or Deferred.Fail gives it), the asker gets the
//     error itself, and the actor goes on with its state as the handler
//     left it: no restart, no backoff for the next caller. An error that
//     wraps a declared one counts as declared. Returned from a tell, it
//     is dropped.
//   - Any other error, and a panic, is a failure: the asker gets a
//     *FailedError (matching ErrActorFailed) that names the member that
//     ran the handler, the actor and the cause; Panic is set, and the
//     cause is a *PanicError, when the handler panicked. The actor
//     restarts after a backoff from its last committed state. A panic
//     never crashes the process.
//
// Whether retrying can help is Temporary(err): true for ErrUnavailable,
// ErrMailboxFull and deadlines, false for everything else, declared
// errors and failures included.
//
// # Passivation
//
// A key with no messages, timers or running body for its idle timeout
// (WithIdleTimeout, default 1 minute) is passivated: its activation ends
// and, unless the definition is durable or replicated, its state is
// dropped and the key's next message starts it again from WithInit's
// state; a durable key's next message starts from its stored state. A
// durable key's timers do not keep it active: they are stored, and its
// owner activates the key again when the first is due (an Every timer
// shorter than the idle timeout keeps its key busy anyway; a longer one
// stores when its next tick is due at each tick). With
// WithIdleTimeout(Never) a key stays active until it is released, its key
// moves to another member, or the system closes.
//
// # In a cluster
//
// The same refs work when the system is a cluster member (system.Start)
// or a client (package client): a key may live on another node, and its
// messages then cross the network. What that asks of a definition:
//
//   - Messages are encoded with msgpack, structs as maps keyed by field
//     name. When M is an interface, list its concrete types with
//     WithMessages, so the receiving node can decode them; a clustered
//     system refuses a definition without the list (ClusterErr). Reply
//     types must be concrete types. Messages are msgpack's own bytes,
//     so any msgpack reader can decode them. A message type that
//     implements msgpack.CustomEncoder (value receiver) and whose pointer
//     implements msgpack.CustomDecoder is encoded and decoded by those
//     methods.
//   - Errors keep their identity across nodes. A definition's declared
//     errors arrive as the same sentinel (errors.Is) or a decoded value of
//     the same type (errors.As, fields and all), wrapped in the wrapper's
//     text when the handler wrapped one: a sentinel crosses by its text, a
//     type by its Go name and msgpack value, so keep both stable. Failures
//     arrive as the same *FailedError as locally, its cause known by its
//     text (a panic's as a *PanicError holding the text). The runtime's
//     errors match as locally: ErrMailboxFull, ErrActorFailed,
//     ErrUnknownActor, context.DeadlineExceeded, and so on.
//     ErrUnavailable means no member can serve the key now (its owner is
//     down, or this node lost the majority); it is temporary.
//   - A message, and a reply, is limited in size (system.Config.MaxMessage,
//     client.Config.MaxMessage, default 16 MiB of msgpack): one over it
//     fails with ErrMessageTooLarge, which is permanent, wherever its key
//     lives and wherever its asker is. A member therefore measures the
//     messages to its own keys, and the replies to its own askers, too:
//     by the type's bound where it has one, else by encoding them; a
//     standalone system encodes nothing and has no limit.
//   - Context.Member names the member running the handler (its address,
//     as in system.Members), "" in a standalone system.
//   - An ask that would wait on an actor already waiting for the asker,
//     up the chain of asks (A asks B, B asks A), fails at once with
//     ErrAskCycle (a *CycleError), locally as across nodes.
//   - Pinned definitions tie each key to one member: take their refs
//     with RefAt(sys, memberAddr, key).
//   - A handler that asks an actor of its own definition refers to the
//     Def inside its own initializer: declare the Def variable first and
//     assign it in an init function, as Go requires.
//
// # Known gaps
//
//   - The state of a definition neither durable nor replicated is not
//     kept: a key whose owner changes starts again from its initial state
//     on the new owner.
//   - A key with stored timers is activated by its new owner only if that
//     member's copy of its state holds them: one that missed the write
//     that set them (cut off then) waits for the key's next message.
//   - Output commit holds a Tell given a context derived from the
//     handler's Context only when the actor told is of a System that
//     stores state: one in the same process with no durable definition
//     gets it at once.
//   - A failure's cause crosses nodes as its text only (sentinels of this
//     package still match); declare the errors callers test for.
package actor
