package wire

import (
	"errors"
	"fmt"
)

// ErrMessageTooLarge reports an envelope larger than the agreed message
// limit, either when sent or announced by a peer.
var ErrMessageTooLarge = errors.New("troupe: envelope exceeds the message limit")

// ErrClosed reports a call on a transport, session or connection that has
// been closed.
var ErrClosed = errors.New("troupe: transport closed")

// ErrPeerRestarted reports a send that cannot complete because the peer
// came back with a new process incarnation: the peer has lost whatever it
// had not yet handed to the layer above, so the send fails explicitly
// rather than vanishing.
var ErrPeerRestarted = errors.New("troupe: peer restarted")

// ErrPeerDead reports a send that cannot complete because the layer above
// declared the peer dead, or because the peer stayed unreachable past the
// resume grace (2 × KeepaliveAfter + KeepaliveTimeout).
var ErrPeerDead = errors.New("troupe: peer dead")

// ErrNeverConnected reports sends that failed because no connection to
// their peer's address ever came up within the resume grace (2 ×
// KeepaliveAfter + KeepaliveTimeout): the address may be wrong, or the
// node gone before we met it. Such errors also match ErrPeerDead; the
// session is forgotten, and a later send to the address starts afresh.
var ErrNeverConnected = errors.New("troupe: peer never reached")

// ErrQueueFull reports a send refused because the envelopes queued for the
// peer and not yet written already fill Config.SendQueue. It is temporary:
// the queue drains as the peer takes what it was sent.
var ErrQueueFull = errors.New("troupe: send queue full")

// ErrUnreachable is the cause of a Suspect peer event in the in-memory
// network of the tests: the peer is partitioned away or absent. (The TCP
// transport reports the dial error itself.)
var ErrUnreachable = errors.New("troupe: peer unreachable")

// ErrHandshakeTimeout reports a handshake that did not complete within
// Config.HandshakeTimeout.
var ErrHandshakeTimeout = errors.New("troupe: handshake timed out")

// RefuseReason says why a handshake was refused.
type RefuseReason uint8

// Refusal reasons. Their numeric values travel in goodbye frames and never
// change meaning.
const (
	RefusedUnknown     RefuseReason = 0 // the peer gave a reason this binary does not know
	RefusedCluster     RefuseReason = 1 // cluster names differ
	RefusedVersion     RefuseReason = 2 // frame protocol versions differ
	RefusedLimits      RefuseReason = 3 // frame, message or window limits differ
	RefusedTLS         RefuseReason = 4 // the TLS handshake failed: wrong CA, missing or bad certificate
	RefusedIdentity    RefuseReason = 5 // the node identity is invalid, or is our own
	RefusedMalformed   RefuseReason = 6 // the handshake bytes could not be decoded
	RefusedCompression RefuseReason = 7 // no compression codec in common although one was required
	RefusedTimeout     RefuseReason = 8 // the handshake did not complete in time
)

func (r RefuseReason) String() string {
	switch r {
	case RefusedCluster:
		return "cluster name mismatch"
	case RefusedVersion:
		return "protocol version mismatch"
	case RefusedLimits:
		return "limits mismatch"
	case RefusedTLS:
		return "tls handshake failed"
	case RefusedIdentity:
		return "bad node identity"
	case RefusedMalformed:
		return "malformed handshake"
	case RefusedCompression:
		return "no common compression codec"
	case RefusedTimeout:
		return "handshake timed out"
	default:
		return fmt.Sprintf("unknown reason %d", uint8(r))
	}
}

// Refused is the error of a handshake that one side rejected. ByPeer tells
// whether the remote side refused us (true) or we refused it (false).
// Match it with errors.As:
//
//	var r *wire.Refused
//	if errors.As(err, &r) && r.Reason == wire.RefusedCluster { ... }
type Refused struct {
	Reason RefuseReason
	ByPeer bool
	Detail string // human-readable specifics, e.g. both cluster names
	Err    error  // the underlying cause, if any (a TLS error, a decode error)
}

func (e *Refused) Error() string {
	who := "refused peer"
	if e.ByPeer {
		who = "refused by peer"
	}
	s := "troupe: handshake " + who + ": " + e.Reason.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Refused) Unwrap() error { return e.Err }
