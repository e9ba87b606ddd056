// Package adminui serves the operator's page of the administration
// listener: one HTML page at / and its script and style sheet under
// /ui/, embedded in the binary, with no build step and nothing fetched
// from elsewhere.
//
// # What the page reads
//
// The page is a client of the management API (package adminapi) and of
// nothing else: its script polls /api/v1/status, members, placement,
// types and records every second, relative to the page's own URL (so
// that it works behind a proxy that mounts the listener under a path),
// and asks placement/where for the key lookup. It needs the API switched
// on. When a poll fails the page keeps the last data it had and says
// since when it is stale; the node records, which come from a store that
// can fail on its own, are kept and marked stale apart from the rest.
//
// # Security
//
// The page and its assets are served as the API is, behind the same
// bearer token when one is set: the browser must send the header (an
// authenticating proxy in front of the listener, or a browser told to
// add it). Every response forbids sniffing and carries a
// Content-Security-Policy that allows this listener's own script, style
// and API only: no inline script or style, no other origin, no framing.
// The script builds the page with DOM calls and text nodes, never with
// HTML strings, so that names from the cluster cannot become markup.
package adminui
