// Package client reaches the actors of a Troupe cluster from a process
// that is not a member: a web server, a CLI, a batch job.
//
// # Using a client
//
// A Client connects to the seeds, learns the member list (and which actor
// types each member hosts) and keeps it fresh: it follows up to three
// alive members, which push the list to it when it changes, and asks them
// for it again every SyncInterval. A followed member that dies is
// replaced as soon as a list says so; the others' pushes carry its death
// meanwhile. It
// computes the ring itself and sends each message straight to the key's
// owner, so there is no proxy hop. A Client implements actor.System: take
// refs with Def.Ref(client, key) and use Tell and Ask exactly as inside a
// node, with the same typed replies and errors.
//
//	c, err := client.New(ctx, client.Config{ClusterName: "shop", Seeds: []string{"10.0.0.1:7400"}})
//	...
//	n, err := actor.Ask(r.Context(), Counter.Ref(c, path), Get{})
//
// # The placement version
//
// PlacementVersion is an opaque token of where keys live in the client's
// view: each actor type's ring membership and which ring members do not
// serve. A member that sees the same placement has the same token (its
// admin API reports it as placement_version): compare them for equality
// only. Members send theirs with each list, and a member that receives
// from the client a message for a key it does not own sends the client
// its version (at most once per 100 ms): a client whose version differs
// asks that member for its list at once, rather than at the next
// SyncInterval. A sync names the list the client last had from the
// member; a member whose list is still that one answers with its version
// alone, which refreshes the client as the list would, so a steady
// cluster costs each sync a few bytes instead of the list.
//
// WaitAlive(ctx, n) waits until the client sees n members alive and none
// suspect or still joining, after New for instance, before the first
// sends. Members lists the current members: one per address, the newest
// process there, none that left.
//
// New waits for the first member list up to Config.JoinTimeout (default
// 30 s) whatever its context allows, then fails with a *cluster.JoinError
// naming each seed's last error; when every seed refuses the handshake it
// fails at once with cluster.ErrJoinRefused (errors.As finds the
// *wire.Refused saying why).
//
// # Guarantees
//
// A Client is safe for concurrent use by many goroutines (one per HTTP
// request, say): share one per process. It cannot receive tells: it hosts
// no actors, and nothing can address it. Asks cancelled by their context
// (an HTTP request's r.Context()) are withdrawn on the owner too.
//
// A connection to a member that has carried nothing for Config.Silence
// (not even the keepalive's answer) counts as broken while the member is
// still in the cluster: the client then sends what it has for that member
// through another member, which forwards a tell once and asks the owner on
// the client's behalf, as members do for each other (docs/cluster.md,
// "Relaying around a broken link"). So a client whose own path to one
// member fails keeps reaching that member's keys.
//
// When an owner dies, asks waiting on it fail with actor.ErrUnavailable
// as soon as the members' push reports it dead (with the fast timings,
// about a second after a crash); later sends go to the key's new owner.
// Connections that break are redialed by the transport.
//
// # Metrics and readiness
//
// With Config.Metrics set (a *prometheus.Registry of the caller's; never
// the global default unless passed), the client registers the troupe_*
// metrics a member reports where they mean the same for a client: tells
// and asks by actor type and outcome, the ask duration histogram, asks
// in flight, the members it knows by status, the transport's bytes and
// frames by stream, resumes, round trip and pacing, relaying, build,
// uptime and readiness. Its tells that succeed count with outcome
// "sent" (the member that handles one counts it again as "ok"). Every
// label comes from a fixed set: series grow with the actor types the
// client takes refs of, never with keys or members. docs/operations.md
// lists them. Close unregisters them.
//
// A client opens no listener of its own: the process around it serves
// HTTP already. Handler gives that server the client's /healthz, /readyz
// (open and knowing an alive member, as Ready reports, with a JSON body
// shaped as a member's) and /metrics (when Config.Metrics is also a
// Gatherer), to mount under a prefix behind the server's own
// authentication.
package client
