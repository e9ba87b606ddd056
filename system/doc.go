// Package system is Troupe's runtime: it hosts actor definitions in this
// process, activates keys on their first message, schedules them, and
// passivates them when idle.
//
// # Model
//
// New(Config) starts a System that hosts the definitions in
// Config.Actors. Each key of each type is an activation with a bounded
// mailbox. A key with messages gets a goroutine that handles them one at a
// time; when the mailbox is empty the goroutine spins briefly, lingers a
// tick or two if the key is busy, then exits, so an idle actor holds no
// goroutine, only its state (about 200 bytes of runtime bookkeeping). A key
// with no messages, timers or running body for its idle timeout is
// passivated: its state is dropped and the next message starts it afresh.
//
// # Failures
//
// A failed message (error or panic) restarts the activation after a
// backoff that doubles from Config.BackoffMin to BackoffMax per
// consecutive failure; its state is the last one it saved, its mailbox is
// kept, and the messages queued behind the failed one are handled after
// the restart, in order.
//
// # Observing
//
// Config.Observer receives activation starts, ends and failures, dropped
// messages and full mailboxes. Stats gives a snapshot of the load: active
// keys, queued messages, the deepest mailbox, asks in flight, restarts.
//
// # Shutdown
//
// Close(ctx) refuses new messages, lets activations drain their mailboxes
// until ctx ends, then cancels the handlers still running (their Context
// is done) and fails what is still queued with actor.ErrSystemClosed. It
// stops every timer and waits for every goroutine it started.
package system
