package replica

import (
	"errors"
	"fmt"
)

// ErrNotServing is returned by Write and Read on a key this core does not
// serve: it has not acquired it, is still fencing older owners, or stepped
// down.
var ErrNotServing = errors.New("troupe: replica: key is not served here")

// ErrNotReplica is returned by Acquire when this node is not in the
// replica set it was given.
var ErrNotReplica = errors.New("troupe: replica: owner is not in the replica set")

// ErrTermExhausted is returned by Acquire when a term above every term
// seen for the key would not fit in 64 bits: a peer claimed the largest
// term, and picking the next one would wrap to zero and lose to every
// older epoch.
var ErrTermExhausted = errors.New("troupe: replica: ownership terms of the key are exhausted")

// ErrInvalidKind is returned for a record kind the format does not know or
// that a caller may not write.
var ErrInvalidKind = errors.New("troupe: replica: invalid record kind")

// ErrUnsupportedVersion is matched by the error of decoding a message of a
// newer format version.
var ErrUnsupportedVersion = errors.New("troupe: replica: unsupported message format version")

// ErrTruncated is matched by the error of decoding a message that ends
// early.
var ErrTruncated = errors.New("troupe: replica: truncated message")

// ErrMalformed is matched by the error of decoding a message with an
// unknown type or kind, an impossible length or trailing bytes.
var ErrMalformed = errors.New("troupe: replica: malformed message")

// DecodeError says where decoding a message, or applying a delta's edit,
// failed. It matches its cause (ErrTruncated, ErrMalformed or
// ErrUnsupportedVersion for a message; ErrMalformedDelta for an edit).
type DecodeError struct {
	Offset int
	Err    error
	What   string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%v: %s at byte %d", e.Err, e.What, e.Offset)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrMalformedDelta is matched by the error of applying a delta accept's
// edit that does not describe a value of the base it names: an
// operation past the base's end, a value longer or shorter than
// declared, or an edit that ends early.
var ErrMalformedDelta = errors.New("troupe: replica: malformed delta")
