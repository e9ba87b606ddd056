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
// timeout, the ask timeout and the restart backoff; WithInit sets each
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
// handler's Context if running. An ask from outside any handler to an
// idle actor of the same system runs the handler on the asking goroutine
// (one message at a time per key and order per sender hold: mail
// arriving meanwhile queues behind it). Its Context is cancelled at the
// deadline only if the handler looks at it (Done, Err); a handler that
// blocks without looking holds such an asker until it returns, and a
// reply given after the deadline is dropped, so the ask still fails with
// the deadline's error, only late.
//
// # Handlers and state
//
// One message at a time per key, in the order each sender sent them. The
// Context gives the actor's ref, its state, timers, the system, and a way
// to ask without blocking (Pipe) or to reply later (Defer).
//
// State is a value the runtime keeps for the key. SetState and Update are
// the commit points: after a failure (a returned error or a panic) the
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
// encodable (no funcs or channels): later, replicated and durable actors
// store and ship them.
//
// # Failures
//
// A handler error or panic reaches an asker as an error wrapping
// ErrActorFailed (errors.As gives *FailedError and its cause, a
// *PanicError for panics); a panic never crashes the process. Return an
// error only when the actor cannot go on: expected outcomes belong in the
// reply type.
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
//     types must be concrete types. Plain struct messages are encoded
//     and decoded by a plan compiled for the type when it is registered
//     (no reflection per message; the bytes are msgpack's own; see
//     plan.go for the field kinds and tags it follows, the rest going
//     through msgpack). A message type that implements
//     msgpack.CustomEncoder (value receiver) and whose pointer implements
//     msgpack.CustomDecoder is encoded and decoded by those methods,
//     called directly.
//   - Errors keep their identity across nodes: errors.Is matches
//     ErrMailboxFull, ErrActorFailed (with the cause's sentinel when it
//     has one), ErrUnknownActor, context.DeadlineExceeded, and so on.
//     ErrUnavailable means no member can serve the key now (its owner is
//     down, or this node lost the majority); it is temporary.
//   - An ask that would wait on an actor already waiting for the asker,
//     up the chain of asks (A asks B, B asks A), fails at once with
//     ErrAskCycle (a *CycleError), locally as across nodes.
//   - Pinned definitions tie each key to one member: take their refs
//     with RefAt(sys, memberAddr, key).
//   - A handler that asks an actor of its own definition refers to the
//     Def inside its own initializer: declare the Def variable first and
//     assign it in an init function, as Go requires.
//
// # Status
//
// Issue 2 (local runtime): built, tested and measured against Proto.Actor
// (BENCHMARKS.md, docs/status.md). Ask, ping-pong, activations and idle
// heap meet their targets; tell 1.7-1.9x in session 4 (medians of ten
// side-by-side runs on a loaded machine, single runs 1.0-3.5x): a tell to
// a busy actor probes the table's first slot for the key inline and
// queues under the cell mutex without spilling or calling (cell.tell). A
// per-key anchor in the ref and a lock-free mailbox were weighed and not
// built (docs/status.md, "Session 4: tell"). A tell from a handler to an
// idle actor may run that actor on the teller's goroutine once the
// handler returns (the direct hand-off, handoff.go); a handler that tells
// and then blocks until the told actor acts still works (the actor gets a
// goroutine of its own within a linger tick or two, at once if the
// handler asks), but waits for the linger clock.
//
// Session 5 (issue 5): an Ask alone in flight in its system (the host's
// count of asks out is one), with a context that cannot end (Done nil:
// context.Background; the ask's own timeout still applies), whose
// request goes to another node waits for
// the reply in the network poller, on a pooled eventfd (waker_linux.go),
// instead of on its channel: wire's reader completes the reply and parks,
// and the thread that ran it picks the asker up as it polls, as a bare TCP
// client is woken, without the scheduler's wake-up of an idle thread that
// readying a goroutine costs. Concurrent asks keep the channel (the
// wake-up is what runs them in parallel). Like any Go network read, such
// an asker is noticed when a thread next polls: at once when the goroutine
// that completed the reply parks (wire's reader does when its next read
// finds nothing), or when any goroutine is readied or parks; after the
// relief watch (1-9 ms) if the reader goes on to run a handler inline;
// within sysmon's 10 ms if that goroutine runs on without parking and the
// other threads have work or sleep. Elsewhere than Linux every ask waits
// on its channel. The eventfd is never read: each write is an edge in the
// poller, and the waiter looks at its outcome instead (two reads and a
// poller event per ask fewer). A context with Done keeps the channel:
// watching it from the poller took a goroutine per ask (AfterFunc on a
// handler's context), which also read that context after the handler
// returned, a data race with the cell's reuse of it.
//
// Session 6 (issue 5): a lone remote ask whose context package context
// made (WithTimeout, WithDeadline, WithCancel, values on those: what real
// callers pass) waits on the waker too: context.AfterFunc on such a
// context joins it as a child under its lock (no goroutine, nothing run
// until it ends), and its deadline ends the wait through the context, so
// the poller gets a deadline only for the ask timeout. Other contexts (a
// handler's, or another package's type) keep the channel (watchable.go).
// The waker is armed (deadline, context watch) before the request is
// written, and the waiter looks at the slot's state, so such an ask
// makes no done channel. A remote ask costs 12 allocations in all, both
// sides, with context.Background (18 before): the node's reply slot and
// what its reply needs in one (an outcome interface instead of a
// closure), small envelopes cut from a per-session slab in wire, the
// router's batches sent with wire's Post, whose receipts are reused.
//
// Session 5 (issue 2): a local ask from outside any handler runs an idle
// actor's handler on the asking goroutine (localask.go; p50 about 0.5 us
// against 1.2-2.0 before; the ask's deadline reaches such a handler only
// through its context, see Ask), cold starts reuse their loop states, and
// no idle cell reads the clock (the sweep stamps idle cells, so a cell
// passivates at most one sweep later).
package actor
