// Package memrecords is the in-process node record store: the default
// backend of noderecord.Store, needing no outside service. The process
// feeds it (from its membership view) and reads it like any backend.
//
// # Model
//
// One mutex guards a map of live records, each with the time its lease
// lapses, and a revision counter that every change (an accepted Put, a
// Remove, an expiry) advances by one. Each change is also appended to a
// bounded history; watchers are cursors into it, so a watcher costs no
// memory of its own and one that falls more than Config.History changes
// behind gets noderecord.ErrCompacted and relists. Compact drops the
// history at once.
//
// Leases lapse on the store's Clock: a timer set for the earliest
// deadline deletes what is due, and every call first deletes what is
// due, so a lapsed record is never returned even before its timer runs.
//
// # Failing closed
//
// SetUnavailable makes every call fail with noderecord.ErrUnavailable
// until it is called with nil, and ends every watch (an error other than
// its context's ends a watch, whatever the backend); FailWatches ends
// the watches open now and nothing else, as a backend whose own watch
// failed would. Both are for tests of callers that must fail closed;
// the system's own use calls neither.
package memrecords
