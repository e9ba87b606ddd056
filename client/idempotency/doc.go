// Package idempotency is net/http middleware that makes a mutating request
// safe to retry: the first request with a given Idempotency-Key runs the
// handler, and every retry with the same key and the same request gets the
// response the first one produced, without running the handler again.
//
// # What it does to a request
//
// Every request gets a request id, a random 128-bit value in hex, which
// the middleware puts in the response header (X-Request-Id unless
// configured otherwise) and in the request's context (RequestID), named
// there with actor.WithRequestID too: the asks the handler makes with the
// request's context carry it to their handlers, failures and logs. A
// request with a valid W3C traceparent header (and tracestate, kept if
// valid) has that trace context attached to its context with
// actor.WithTraceContext, so that the tells and asks its handler makes
// carry it to theirs; an invalid one is ignored, as the specification
// asks. For the
// methods it guards (POST and PATCH unless configured otherwise) the
// request must carry an Idempotency-Key header: a string of 1 to 255
// visible ASCII characters, bare or as a quoted structured-field string
// ("..."), as the IETF's Idempotency-Key draft writes it. Then:
//
//   - The key is scoped by the application, the route and the tenant
//     (Config.App, Config.Route, Config.Tenant): the same key sent by two
//     tenants, or to two routes, names two requests.
//   - The request is hashed canonically: method, path, query (parameters
//     sorted by name, the values of one name in their order) and body, each
//     length-prefixed, with BLAKE2b-256.
//   - The store (Config.Store) is asked for the key. A new key starts an
//     attempt and the handler runs; its status, headers and body are held,
//     stored with the key, and only then sent (a response the store could
//     not keep is not sent: the client sees 503 and retries). A key whose
//     response is kept is answered from it, with the header
//     Idempotent-Replayed: true. A key kept with another request's hash is
//     answered 409 (code idempotency_key_reused); a key whose first request
//     is still running is answered 409 (code request_in_progress) with
//     Retry-After.
//
// Errors are JSON: {"error":{"code":"...","message":"...","request_id":"..."}}.
// A missing or malformed key is 400, a body over Config.MaxBody is 413, a
// store that cannot answer is 503: the handler does not run.
//
// A handler that panics has a 500 response kept for its key (the panic is
// raised again for net/http to handle): a retry is not run again, since
// the panic may have come after some of its effects. A response larger
// than Config.MaxResponse is replaced by a kept 500 for the same reason.
// Responses are held whole, so the handler's writer does not flush or
// hijack.
//
// # Stores
//
// Store is the seam between the middleware and where the records live.
// ActorStore keeps them in a Troupe cluster, one replicated actor
// (Records) per scoped key: every web server in front of the cluster
// shares them, and a record survives the loss of a member. An attempt
// holds its key for a lease; a server that dies mid-request leaves it
// "in progress" until the lease ends, then a retry starts a new attempt
// and the old one can no longer complete. MemoryStore keeps the records
// in this process, with retention and bounds on their number and bytes:
// for one web server, or tests. Any other Store must make Begin atomic
// per key across the servers that share it, so that two never both start
// an attempt for one key.
package idempotency
