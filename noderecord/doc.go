// Package noderecord defines what each Troupe process publishes about
// itself for operators and tools: a small, bounded record, the rule that
// orders its updates, and the contract of the stores that hold them.
// docs/records.md describes the same for operators.
//
// # Records
//
// A Record names its process (cluster, node, role, and an incarnation
// chosen at start), says where to reach it (data and admin addresses),
// what it runs (build version, start time), how it is (Health, and a
// separate Ready flag), a few cumulative counters and at most 16
// labels. Every field has a limit (MaxFieldBytes and the rest); Validate
// refuses a record over one with a *FieldError matching ErrTooLarge.
// Records hold no secrets and nothing per actor: they are rebuilt from
// the live processes whenever a store loses them.
//
// Encode and Decode give the stored form: a msgpack map that starts
// with FormatVersion. Decode refuses a newer version, input over
// MaxEncodedBytes, and anything that is not a valid record.
//
// # Ordering
//
// A process puts its record every Timings.Heartbeat with a sequence one
// greater than the last. Decide is the rule every store applies: accept
// when no record exists, when the incarnation differs (the process
// restarted), or when the sequence is greater; ignore, without an error,
// a duplicate or stale update, which a retry or a delayed heartbeat
// produces. So a record never moves backward within an incarnation.
//
// # Leases
//
// An accepted update holds the record for its lease TTL
// (Timings.LeaseTTL); one that goes that long without another accepted
// update is deleted, and watchers see an EventDelete, as for a Remove.
// Before that, Timings.Health shows a record unhealthy once it has gone
// UnhealthyAfter without an update, whatever it says of itself.
//
// # Clocks
//
// A record's times come from different clocks. Started is the writing
// process's. Observed is set by Store.Put when the store accepts an
// update, by the clock of the process that runs the Store's code: for
// the in-process store, the process that holds it (which also derives
// and puts the other members' records, so every time in it is its own);
// for etcd, which has no clock to offer, the writing process's.
// Snapshot.At is the reading process's clock at the read. Lease TTLs are
// durations the store times itself (etcd's leader, the in-process
// store's timer), so skew between wall clocks never changes when a
// record lapses.
//
// Timings.Health compares Observed with Snapshot.At. With one clock (the
// in-process store) skew does nothing. With etcd, a writer whose clock
// runs behind the reader's by d looks d older to that reader: once d
// reaches UnhealthyAfter - Heartbeat (10 s with the defaults) a process
// that heartbeats on time reads unhealthy. A writer ahead by d looks d
// younger: after it falls silent it reads healthy for up to d longer,
// never past its lease, which still lapses on time. Keep the processes'
// clocks synchronised (NTP) well within UnhealthyAfter - Heartbeat.
//
// # Stores
//
// Store is the contract every backend meets: Put applies Decide
// atomically with its write, Snapshot lists a cluster at one opaque
// Revision, and Watch streams changes after a revision, so that a reader
// lists once, then follows. A watch whose revision left the store's
// history fails with ErrCompacted, and the reader lists again. Calls
// that cannot be answered in time fail with ErrTimeout or
// ErrUnavailable, and the caller then fails closed instead of answering
// from an old view. The package recordtest is the suite every backend
// passes; the default backend lives in the process, and the module
// github.com/troupe-go/troupe/etcdrecords keeps records in etcd.
package noderecord
