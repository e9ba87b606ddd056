// Package runtime is the engine behind package actor: per actor type, a
// sharded table of cells (one per active key) with their mailboxes,
// goroutines, timers and reply slots; the direct hand-off between
// goroutines, inline runs of asks from other nodes on the transport's
// reader, and the per-kind lists of ask deadlines. Messages that cross
// nodes are encoded by package codec. It builds on package host, which
// holds what a system shares across types, and reaches the network only
// through host.Remote.
//
// Go instantiates generic code only where its type arguments are known,
// and a definition's state and message types are known only in
// actor.Define: so actor imports this package and instantiates NewKind,
// and this package never imports actor or anything above it. The typed
// API's context is the third type parameter C of the engine's types, so
// that a handler gets actor.Context without a conversion or an allocation
// per message.
package runtime
