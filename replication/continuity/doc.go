// Package continuity keeps continuity records for work that is not an
// ask: a side effect an application runs itself (a call to a payment
// provider, a message to another system) that a retry must not run
// twice. An ask with an idempotency key gets the same guarantee from the
// actor runtime (actor.WithIdempotencyKey); this package is for the work
// around it.
//
// # Records and attempts
//
// A record is named by a scope (what kind of work: "payments.charge"), an
// optional tenant and a key (the caller's idempotency key). Submit admits
// the work: the first Submit of a key creates the record as submitted,
// attempt 1, with the hash of the request, and the caller runs the work
// and then Completes (or Rejects) the record with the response it wants
// retries to get. A Submit of the same key and request finds the record:
// completed or rejected, it returns it and the caller answers from it;
// submitted and still leased to its attempt, it fails with ErrInProgress;
// submitted and leased no more (its worker died or hung), it starts the
// next attempt, which fences the previous one: that attempt's Complete or
// Reject fails with ErrStaleAttempt from then on. The same key with
// another request fails with ErrConflict.
//
// # Hosting
//
// Records are the keys of one actor definition, which every member of the
// cluster (or the standalone system) hosts with its ledger: put what
// Actors returns in system.Config.Actors. Each record is kept on three
// replicas and written at a majority before Submit, Complete or Reject
// returns, and its ownership epochs fence an owner that a partition or a
// pause left behind, as for any replicated actor (docs/replication.md).
// There is no way to host the records without a ledger, so no member
// keeps ended records without a bound.
//
// # Retention and bounds
//
// A completed or rejected record is forgotten after its retention
// (Options.Retain, 24 hours by default). A submitted record is never
// forgotten, neither by expiry nor by a bound.
//
// Each member keeps a ledger, a pinned actor of one key, that indexes
// the ended records its member owns: those whose owner on the member
// ended them, or found them ended on activation (after a failover, a
// restart or a passivation), each with its end, the end of its retention
// and its size. The ledger forgets them: when a record's retention ends,
// and past the member's bounds (Bounds: by default 1,000,000 records and
// 8 GiB, counted at every copy), where the records that ended first go
// first, it tells the record to evict itself. The evict goes to the
// record's current owner, which deletes the record only if it is still
// ended and is the one the ledger counted (a record submitted again
// under the key since is not). An ended record holds no timer of its
// own, so it leaves memory when its key idles out like any other; the
// ledger's one timer stands for all of them. The ledger's entries are
// hints, and the bound is per member, not per cluster:
//
//   - Under a steady stream a member holds at most its bounds once the
//     evicts it sent are handled; in between, a few records more (those
//     in flight).
//   - A record that moved to another member (its owner failed, or the
//     ring changed) is counted by the new owner once it is used again;
//     until then the old owner's ledger, if that member lives, evicts it
//     wherever it is (a record counted by two ledgers is evicted by the
//     first to need room: sooner, never later). A restarted member's
//     ledger starts empty and counts the records it owns as they are
//     used: one past its retention is forgotten then, and a record never
//     used again stays in the store until it is.
//   - A tell to a ledger that its mailbox refuses, or an evict that cannot
//     be sent (the record's owner is down), is logged at Warn: the record
//     is forgotten at its next use past its retention.
//   - The ledger keeps its index in memory, not the records: about the
//     key's length plus 150 bytes per record counted.
//   - A retry of a record that was evicted or forgotten is new work: its
//     Submit starts attempt 1. Size the bounds and the retention to
//     outlast the retries.
//
// UsageOf reports what a member's ledger counts.
//
// A forgotten record, whether by expiry or by eviction, leaves a tombstone
// (its key, with an empty record and the key's ownership promise) on each
// replica, so that a stale replica cannot bring it back. Once the
// tombstone is older than system.Config.TombstoneAge (48 h by default),
// the member that owns the key collects it: every replica erases it and
// keeps only the key's promise, with a horizon that voids any older copy
// (docs/replication.md, "Collecting tombstones"). Tombstones are not
// counted by Bounds. Budget, at each copy, on disk and in the replica's
// memory, for each key ever used: its promise (the key, an epoch and the
// horizon) for good, and its tombstone until it is collected.
package continuity
