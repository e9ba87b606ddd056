package cluster

import "errors"

// ErrNodeClosed is returned by calls on a Node after Close, and by a
// Deliver that was waiting when the Node closed.
var ErrNodeClosed = errors.New("troupe: membership node closed")

// ErrIdentityMismatch is returned by Start when the transport speaks for
// another address than Config.Advertise: peers would learn one identity
// from the handshake and another from the membership records.
var ErrIdentityMismatch = errors.New("troupe: transport identity does not match Config.Advertise")
