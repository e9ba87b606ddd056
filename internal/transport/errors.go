package transport

import (
	"errors"
	"fmt"
)

// ErrMalformedFrame reports bytes that do not follow the frame format of
// docs/wire.md: a bad type, flag, stream or payload layout. The connection
// that produced them is closed; nothing it carried after them is trusted.
var ErrMalformedFrame = errors.New("troupe: malformed frame")

// ErrFrameTooLarge reports a frame whose payload, or whose decompressed
// chunk, exceeds the agreed frame limit.
var ErrFrameTooLarge = errors.New("troupe: frame exceeds the frame limit")

// ErrUnsupportedVersion reports a frame carrying a frame-protocol version
// this binary does not speak. Versions only move forward; an old binary
// refuses newer frames with this error instead of guessing.
var ErrUnsupportedVersion = errors.New("troupe: unsupported frame protocol version")

// ErrCreditOverrun reports a peer that sent more bytes on a stream than it
// had credit for: a protocol violation that closes the connection.
var ErrCreditOverrun = errors.New("troupe: peer overran its stream credit")

// ErrUnknownType reports an envelope whose type name is not registered.
var ErrUnknownType = errors.New("troupe: unknown envelope type")

// ErrDuplicateType reports a second registration of a type name or Go type.
var ErrDuplicateType = errors.New("troupe: envelope type registered twice")

// ErrDecompress reports a compressed chunk that does not decode, decodes to
// a length other than the one announced, or would exceed the frame limit.
var ErrDecompress = errors.New("troupe: bad compressed chunk")

// ErrUnknownStream reports a stream id outside the ones this transport
// serves.
var ErrUnknownStream = errors.New("troupe: unknown stream")

// FrameError describes a frame that could not be decoded. It unwraps to
// ErrMalformedFrame, ErrFrameTooLarge, ErrUnsupportedVersion,
// ErrMessageTooLarge or ErrDecompress, so callers may match either the
// sentinel with errors.Is or the fields with errors.As.
type FrameError struct {
	Type   FrameType // type from the header, or 0 if the header was unreadable
	Stream StreamID  // stream from the header
	Detail string    // what was wrong, for humans
	Err    error     // one of the sentinels above
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("%v: %s frame on stream %d: %s", e.Err, e.Type, e.Stream, e.Detail)
}

func (e *FrameError) Unwrap() error { return e.Err }

func frameErr(err error, h Header, format string, args ...any) error {
	return &FrameError{Type: h.Type, Stream: h.Stream, Detail: fmt.Sprintf(format, args...), Err: err}
}
