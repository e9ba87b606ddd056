package flow

import "errors"

// ErrCreditOverrun reports that the peer sent more bytes on a stream than the
// window it was granted allows. It is a protocol error: the session should
// close the connection.
var ErrCreditOverrun = errors.New("troupe: flow: peer overran its stream credit")

// ErrCreditExhausted reports an attempt to send more bytes than the stream's
// available credit. It is a bug in the caller, which must check
// [SendCredit.Available] first.
var ErrCreditExhausted = errors.New("troupe: flow: send exceeds available credit")

// ErrInvalidGrant reports a credit grant from the peer that cannot be true:
// it claims more bytes consumed than were sent, or a window that is not
// positive. It is a protocol error.
var ErrInvalidGrant = errors.New("troupe: flow: invalid credit grant")

// ErrResumeOffset reports a received-byte count, offered by the peer when a
// connection resumes, that lies outside what this side sent and what the peer
// already said it consumed. The session must treat the resume as impossible.
var ErrResumeOffset = errors.New("troupe: flow: resume offset outside the unconsumed range")

// ErrConsumeUnheld reports an attempt to consume more bytes than complete
// envelopes hold on a stream. It is a bug in the caller.
var ErrConsumeUnheld = errors.New("troupe: flow: consumed more bytes than are held")

// ErrUnknownStream reports a stream id that the scheduler was not configured
// with.
var ErrUnknownStream = errors.New("troupe: flow: unknown stream")

// ErrInvalidConfig reports a configuration field that makes no sense. The
// wrapping error names the field.
var ErrInvalidConfig = errors.New("troupe: flow: invalid config")
