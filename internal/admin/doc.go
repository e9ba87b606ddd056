// Package admin serves a process's administration surface over HTTP:
// liveness (/healthz), readiness (/readyz), Prometheus metrics
// (/metrics), the management API (/api/v1/, package adminapi) and the
// operator's page over it (/ and /ui/, package adminui), each enabled on
// its own, on a listener of its own, apart from the data path.
//
// # Security
//
// With a bearer token set, every request must carry it
// ("Authorization: Bearer <token>"): it is compared in constant time and
// a request without it, or with another, gets 401 whatever its path,
// with the API's JSON error (code "unauthorized"). The
// token is never logged or written to a response. TLS, when configured,
// wraps the listener; its config decides whether client certificates are
// asked for and verified.
//
// # Proxies
//
// Options.Proxies lists the networks of the reverse proxies the server
// trusts. Only a request whose TCP peer is in one of them may name its
// client (X-Forwarded-For, walked from the right past the trusted
// proxies) and its user (Proxies.UserHeader, default X-Forwarded-User);
// from any other peer both headers are removed before any handler sees
// them. Forwarded (RFC 7239) is never read. With Proxies.RequireUser,
// a request without a user named by a trusted proxy gets 401; a user
// never stands in for the bearer token, which every request needs when
// set. Handlers read what the server believes with PeerOf; the server
// logs each request and each refusal at Debug with that peer.
//
// # Readiness
//
// The caller computes readiness (package system knows what it means for
// a member); this package writes it as JSON with status 200 when ready,
// 503 otherwise.
package admin
