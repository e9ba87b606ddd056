// Package etcdrecords keeps Troupe's node records in etcd: a
// noderecord.Store for deployments that want the cluster's records in a
// strongly consistent store of their own, outside the processes. It is a
// module of its own, so that the core does not depend on etcd.
//
// # Layout
//
// Each record is one key,
//
//	<Prefix>/clusters/<cluster>/nodes/<role>/<node>
//
// (Prefix defaults to /troupe), whose value is the record as
// noderecord.Encode writes it, attached to an etcd lease of the TTL the
// writer asked for, rounded up to whole seconds. The lease lapses when
// no accepted update renews it, and etcd deletes the key.
//
// # Ordering
//
// Put reads the key, applies noderecord.Decide to the stored record,
// and writes in a transaction that compares the key's mod revision
// with the one it read (or its absence), so that no other writer came
// between; when one did, it reads again. A duplicate or stale update
// writes nothing and renews nothing.
//
// # Leases
//
// An accepted update whose record this Store put last, with the same
// TTL, renews that record's lease with one keep-alive (KeepAliveOnce),
// then writes onto it: a heartbeat costs one transaction and one
// keep-alive after its read, and the keep-alive, served by etcd's
// leader, is no proposal of its own. The first update, one over another
// writer's record (a restart), one with another TTL and one whose lease
// lapsed take a new lease, and revoke the one they replace. Renewed
// before the write, a lease cannot lapse between the two.
//
// # Reading
//
// Snapshot is one linearizable range read of the cluster's prefix: its
// records and the response's revision. Watch follows the prefix from a
// revision; when etcd compacted it, the watcher reports
// noderecord.ErrCompacted and the reader relists. When etcd's watch
// fails otherwise (cancelled by the server, no leader, its client
// closed, its channel ended), the watcher ends with
// noderecord.ErrUnavailable, returned by every later Next, and cancels
// etcd's watch. While etcd is unreachable its client reconnects and
// resumes the watch from where it was: Next waits meanwhile, bounded by
// its context. A record this binary
// cannot read (a newer format) is left out of snapshots and watches and
// counted in Snapshot's Unreadable.
//
// Revisions are etcd's, as decimal strings; callers treat them as
// opaque. Observed is set from the writer's clock (Config.Now), as etcd
// has none to offer, and readers measure its age by their own: see
// noderecord's package doc, "Clocks", for what skew does to health.
package etcdrecords
