package membership

import "errors"

// ErrNodeClosed is returned by calls on a Node after Close, and by a
// Deliver that was waiting when the Node closed.
var ErrNodeClosed = errors.New("troupe: membership node closed")

// ErrIdentityMismatch is returned by Start when the transport speaks for
// another address than Config.Advertise: peers would learn one identity
// from the handshake and another from the membership records.
var ErrIdentityMismatch = errors.New("troupe: transport identity does not match Config.Advertise")

// ErrMalformed is returned when a membership message or record cannot be
// decoded or breaks a documented limit.
var ErrMalformed = errors.New("troupe: malformed membership message")

// ErrUnsupportedVersion is returned when a membership message carries a
// format version newer than this binary understands. An old binary refuses
// newer data rather than misreading it.
var ErrUnsupportedVersion = errors.New("troupe: unsupported membership format version")

// ErrRemoved is returned by Core operations once the local process has been
// marked left: by its own orderly leave, or because a newer process took
// its address. A removed process must restart with a new incarnation.
var ErrRemoved = errors.New("troupe: this process was removed from the cluster")
