// Package adminapi serves version 1 of the management API, the JSON
// under /api/v1/ of a process's administration listener: status,
// members (filtered by status, hosted type, and the role and labels of
// their node records), the node records, placement, where a key lives,
// and the actor types hosted.
//
// It reads everything through a Source, which package system implements
// over a running system, so that no runtime type reaches the handlers and
// the handlers can be tested against a fake. The response types are
// exported for cmd/troupe, the operator CLI, which decodes them; they
// stay internal to the module, and the JSON they describe (documented in
// docs/operations.md) is the contract with other clients.
//
// # Compatibility
//
// Within schema version 1 changes are additive only: a field, an
// endpoint, a query parameter or an error code may be added; none is
// removed, renamed, retyped or given another meaning. Clients ignore the
// fields they do not know. A change that breaks this is /api/v2.
//
// # Responses
//
// Every successful response carries schema_version (1), generated_at
// (RFC 3339, UTC), revision and mode ("cluster" or "standalone").
// revision identifies the membership view the answer was computed from:
// equal views give equal revisions, on any member. Quantities name their
// unit (uptime_seconds, share_ratio). An error is
// {"error": {"code": "...", "message": "..."}} with a code from the Code*
// constants; messages are for people and may change.
//
// # Secrets and keys
//
// Nothing here logs. The key of a where request is echoed in that
// response only; no error message repeats it. A record store's error is
// never repeated either (it may name the store's endpoints): a failed
// snapshot, for /records or a label filter of /members, is a 503
// records_unavailable that says only whether it timed out or the store
// was unavailable.
package adminapi
