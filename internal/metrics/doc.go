// Package metrics holds the Prometheus collectors that a cluster member
// (package system) and a client process (package client) share: the
// runtime's message meters, the process's build and uptime, the member
// list by status, the transport's traffic and paths, and relaying. Each
// process's own collector describes and collects these beside what only
// it has, so that one metric means the same wherever it is reported and
// its name and help text live in one place.
//
// # Bounded labels
//
// Every label takes its values from a fixed set: the registered actor
// types, the outcomes (host.Outcome), the transport's streams, the
// member statuses. None takes a key, a request id, an address or error
// text, so the number of series does not grow with keys, peers or
// clients.
package metrics
