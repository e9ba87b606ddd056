// Package system is Troupe's runtime: it hosts actor definitions in this
// process, activates keys on their first message, schedules them, and
// passivates them when idle.
//
// # Model
//
// New(Config) starts a System that hosts the definitions in
// Config.Actors. Each key of each type is an activation with a bounded
// mailbox. A key with messages gets a goroutine that handles them one at a
// time; when the mailbox is empty the goroutine parks, lingers a tick or
// two if the key is busy, then exits, so an idle actor holds no
// goroutine, only its state (about 200 bytes of runtime bookkeeping). A key
// with no messages, timers or running body for its idle timeout is
// passivated: its state is dropped and the next message starts it afresh,
// unless its definition is durable or replicated. A durable key's timers
// do not keep it active: they are stored, and its owner wakes it when the
// first is due.
//
// # Stored state
//
// A system hosting a durable or replicated definition (actor.Durable,
// actor.WithReplicas) keeps those keys' state in a store: a badger
// database under Config.DataDir, or memory without one (the state then
// lives as long as the System). One replication node per system runs over
// it: a standalone system's node is each key's only replica; a member's
// runs on its transport (the replication stream) and places a key's copies
// on the first n members clockwise on the ring. A key's first message
// acquires it on the member that owns it (fencing an earlier owner) and
// reads its state; each message's changes are written at the definition's
// write level before the handler's outputs leave (see actor's package doc,
// "Durable and replicated state"). Config.Sync fsyncs each batch of writes
// before they count: without it an acknowledged write survives the
// process's crash but not a power loss of its machine, which may lose
// acknowledged writes at every level. A store of a newer
// on-disk format refuses to open: New and Start fail with the store's
// *replication.FormatError.
//
// # Failures
//
// A handler that answers with an error its definition declares
// (actor.WithErrors) has not failed: the activation goes on. A failed
// message (an undeclared error or a panic) restarts the activation after a
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
// Readiness says whether the system is ready to serve, check by check;
// the admin listener serves both (see Administration).
//
// # Administration
//
// Config.Admin opens an administration listener, an HTTP server on an
// address of its own (default loopback, DefaultAdminBind; port 0 picks
// one, which AdminAddr reports), each surface switched on by its own
// field: Health serves GET /healthz (200 while the process can answer)
// and GET /readyz (200 when every readiness check passes, 503 otherwise,
// with a JSON body naming each check: see Readiness and the ReadyCheck*
// constants), Metrics serves GET /metrics, API serves the read-only
// management API under /api/v1/ (this member's status, the members as it
// sees them, placement with each member's share of each ring and where a
// key lives, the hosted actor types with their activations; a standalone
// system answers too, in standalone mode). Where a key lives is answered
// only by a member that hosts the key's type (the definition decides its
// replicas and pinning); another one answers 409 type_not_hosted_here
// with the hosts' addresses. The API's responses carry a
// schema version, their generation time, the revision of the view they
// were built from and units in field names; within v1 they only grow.
// cmd/troupe is a CLI over it, and UI serves a page for a browser over it
// at / (needs API): the members, each one's share of each ring, a key
// lookup, refreshed every second and marked stale when a refresh fails. A bearer token (Admin.Token),
// when set, is required on every path and fails closed with 401; it is
// compared in constant time and never printed. Admin.TLS serves over
// TLS, with client certificates if its config asks for them. Behind a
// reverse proxy, Admin.TrustedProxies names the proxies whose
// X-Forwarded-For and user header (Admin.ProxyUserHeader) the listener
// believes; from any other peer they are dropped, and
// Admin.RequireProxyUser refuses every request a trusted proxy did not
// send naming a user, the token still required when set. The
// listener answers from before a member joins until the end of Close.
// The members the API lists can be filtered by status, hosted type, and
// by the role and labels of their node records (Config.RecordLabels).
//
// Config.Metrics is the Prometheus registry the system registers its
// troupe_* metrics on (never the global default unless passed), with
// labels from fixed sets only: gauges and counters read at scrape time
// from Stats, the membership view, the failure detector, the transport
// and Readiness, and tells and asks by actor type and outcome and ask
// durations, which the runtime counts as messages go (without
// Config.Metrics, a nil check per message). docs/operations.md lists the
// endpoints, the JSON and the metrics with their units.
//
// # Shutdown
//
// Close(ctx) refuses new messages, lets activations drain their mailboxes
// until ctx ends, then cancels the handlers still running (their Context
// is done) and fails what is still queued with actor.ErrSystemClosed. It
// stops every timer and waits for every goroutine it started.
//
// # Cluster
//
// Start(ctx, Config) with Config.Cluster set makes the system a member of
// a cluster: it listens on Cluster.Bind, joins through Cluster.Seeds
// (membership: package cluster) and announces the actor types it hosts.
// Every member registers the same definitions. A ref routes each message
// to the owner of its key: the first live member, clockwise on the ring of
// the members hosting the key's type (package ring), from the key's token,
// which the ref computes once. A message is encoded (msgpack, by field
// name: see actor.Def.WithMessages) and measured against
// Config.MaxMessage wherever its key lives, so that one over the limit
// fails with actor.ErrMessageTooLarge on every path; a key owned here
// gets the message itself, elsewhere the encoding goes over the
// member-to-member connection (package wire configures it; Config sets
// its compression, and its message limit from MaxMessage). The protocol is in docs/cluster.md. What
// callers see:
//
//   - Tells from one member to one key keep their order while the owner
//     is stable. A tell is done once queued for the owner; the owner's
//     mailbox bound holds the stream (and, through the transport's
//     credit, the sender) instead of dropping it.
//   - An ask carries its remaining deadline and its cancellation: a
//     queued request is dropped, a running handler's context ends. An ask
//     fails with actor.ErrUnavailable as soon as the membership declares
//     its owner dead. A member that no longer owns the key answers so,
//     naming the owner it believes in; the asker tries that one once,
//     then fails with ErrUnavailable. A cycle of asks (A asks B asks A)
//     fails with actor.ErrAskCycle instead of waiting out the timeout.
//   - Delivery is at most once: an ask whose owner died or was retired by
//     a newer process at its address before answering fails with
//     actor.ErrOutcomeUnknown (it may have run there), unless its message
//     is actor.ReadOnly or the ask carries an idempotency key
//     (actor.WithIdempotencyKey), which are asked again of the key's new
//     owner. A member that leaves in order answers every ask it accepted,
//     then tells its askers that it runs no more before it announces the
//     leave: an ask it never ran goes to the new owner, whatever its
//     message; one still running when its LeaveTimeout ended fails with
//     ErrOutcomeUnknown (and so does an ask whose handler runs when its
//     own system closes). A keyed ask to a durable or replicated actor
//     commits its effect once per key: the owner keeps its answer in the
//     actor's stored record, written with the state it changed, and
//     answers every retry from it (a deferred reply once it was given;
//     until then a retry fails with actor.ErrInProgress).
//   - Under strict durability (actor.StrictDurability, or
//     Config.StrictDurability for every durable definition) a message
//     runs only once its key's write level is met for it: a keyed ask's
//     request is stored as pending on the replicas first, any other
//     message waits for a quorum to confirm the owner; otherwise it fails
//     with actor.ErrNotAdmitted and its handler does not run. A keyed ask
//     whose owner died mid-handler runs again on the new owner as its
//     next attempt (actor.Context.Attempt).
//   - A member that lost the majority of the cluster (it sees fewer than
//     half of the members alive) refuses the keys it would own with ErrUnavailable. Pinned actors
//     (actor.Pinned, Def.RefAt) ignore placement and majority: they live
//     on the member their key names.
//   - When the member set changes, the activations of keys now owned
//     elsewhere stop their timers and body, handle what is queued, and
//     end (a replicated key is resigned); the next message activates the
//     key on its new owner, from the initial state, or for a replicated
//     definition from what its replicas hold. While the views of the
//     members differ, a tell that reaches a non-owner is forwarded once.
//   - A durable key's timers are stored with its state and fire on its
//     owner: after its owner died, a change moved it (or its replica
//     set), the member restarted on its DataDir, or the key passivated,
//     the member that owns it activates it by itself when the first
//     timer is due, with no message to it, and sets its timers again.
//   - Close leaves the cluster first: placement stops sending this member
//     keys, and queued work drains for up to LeaveTimeout (a *LeaveError
//     names the keys abandoned).
//   - A member the cluster removed while it runs (unreachable for longer
//     than RemoveAfter, or judged dead falsely) rejoins by itself with a
//     new incarnation at the same address and listener, logging at Warn
//     and counting it in Stats.Rejoins; asks it had waiting fail with
//     ErrUnavailable, its runtime and the activations of keys it still
//     owns stay, but those of durable definitions, which end as at a move
//     (their next message acquires the key again for the new
//     incarnation). System.Removed reports the time in between (and failed
//     attempts, logged at Error and retried with backoff until Close).
//   - A join waits for a seed up to Cluster.JoinTimeout (default 30 s),
//     whatever ctx allows, and fails with a *cluster.JoinError naming each
//     seed's last error; when every seed refuses the handshake (another
//     cluster name, version or CA) it fails at once with
//     cluster.ErrJoinRefused and the seeds' *wire.Refused.
//   - A member starting or rejoining gets no keys until it has joined and
//     installed its own view: its record says Joining until then, and
//     members and clients route only to members that do not. Of members
//     started together only the founder (no seeds besides itself, or the
//     smallest address of a seed list that names it) takes keys before it
//     knows another member that does; Start returns once the member takes
//     keys, and fails after Cluster.JoinTimeout when no member ever does
//     (see cluster.Config.Seeds).
//   - Members lists the current members as this one places keys on them,
//     one per address (the newest process there; none that left);
//     WaitAlive(ctx, n) waits until n of them are alive and none is
//     suspect or still joining, so that a program starting members, or
//     waiting out a member's death, needs no polling of its own.
//
// Non-members reach the cluster with package client.
//
// # Known gaps
//
//   - The state of a definition neither durable nor replicated is not
//     kept, and such keys have no ownership epoch: a member paused longer
//     than SuspectAfter + DeadAfter serves them again on its first tick,
//     while its peers still hold it dead. A replicated key's owner is
//     fenced: once another member acquired the key, the paused one's
//     writes and outputs fail.
//   - While members' views of membership disagree, an owner whose view
//     lags a hand-off can still get writes acknowledged over the key's
//     previous replica set (docs/roadmap.md, Known gaps).
//   - A key whose newest record holds a timer is activated by its new
//     owner only if that member's own copy holds one too: one that missed
//     the write setting it (cut off then) waits for the key's next
//     message.
//   - A handler run on the transport's reader that blocks holds that
//     connection for 1-9 ms before another goroutine takes over.
//
// docs/roadmap.md lists what comes next.
package system
