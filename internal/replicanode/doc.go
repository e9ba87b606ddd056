// Package replicanode runs a node's replication core: a [Node] owns one
// replica.Core, one store and the replication stream of a transport
// endpoint, and offers the runtime Acquire (and AcquireFrom after a
// change of replica set), Write, Delete, Read and Resign, each waiting
// under a context, and WriteAsync, which does not wait.
//
// # The loop
//
// One goroutine owns the core. The transport's handler decodes arriving
// envelopes and queues their messages; callers queue requests. Woken, the
// loop yields once (the goroutines ready to queue more run first, so the
// batch grows), then takes everything queued, feeds it to the core in
// arrival order, and for
// the whole batch persists the records the core produced (one Store.Put),
// then sends its messages (one envelope per peer), then answers the
// callers whose tickets are done or failed. A timer ticks the core, which
// sends again what was not answered.
//
// # Counting and catching up
//
// A node that may lack what it acknowledged (a joining member with an
// empty store, a store stopped uncleanly without Sync) starts receiving
// the whole ring: its answers do not count toward quorums. [Node.CatchUp]
// copies a range from a quorum of its other replicas, in paced chunks
// over the replication stream, after which the node counts for it.
// [Node.SetReceiving] adds ranges (a hand-off), which [Node.CopyFenced]
// copies after fencing them at the sources it reads (an owner of the
// previous set whose view lags gets no write acknowledged by them from
// then on); [Node.CountEverywhere] is an operator's override. What the node receives is recorded in its
// store before any answer that depends on it, so a restart before the
// catch-up ended receives it still.
//
// # Errors
//
// A call whose level is not met before its context ends fails with an
// error matching [ErrUnavailable]; a fenced owner's calls fail with a
// [*StaleOwnerError]. A write that fails either way may or may not have
// happened. docs/replication.md has the protocol, the driver and the
// argument for their safety.
package replicanode
