package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/wire"
)

// Error codes of wireError. Zero means no error.
const (
	codeOther uint8 = iota + 1
	codeUnknownActor
	codeMailboxFull
	codeFailed
	codeClosed
	codeUnavailable
	codeNotOwner
	codeCycle
	codeDeadline
	codeCanceled
	codeUndecodable
	codeInvalidRef
	codeNoReply
	codeDeclared // a declared error: name and body travel with its text
	codeTooLarge
	codePanic // a failure's cause: the handler panicked
	codeOutcomeUnknown
	codeIdempotencyConflict
	codeNotAdmitted
	codeInProgress
)

// errNotOwner is what a node answers for a key it does not serve; the
// asker retries once against its fresh view or the hint.
var errNotOwner = errors.New("troupe: not the owner")

// errViewChanged reports that the view changed while an ask was being
// placed: it is placed again under the new one (see Router.enlist).
var errViewChanged = errors.New("troupe: the view changed while placing an ask")

// errWithdrawn reports that an ask waiting to be sent again was withdrawn
// (or failed) meanwhile: there is nothing to send.
var errWithdrawn = errors.New("troupe: ask withdrawn")

// notOwnerError carries the replier's idea of the owner.
type notOwnerError struct{ hint string }

func (e *notOwnerError) Error() string { return "troupe: not the owner; try " + e.hint }
func (e *notOwnerError) Unwrap() error { return errNotOwner }

// toWire turns an outcome into its wire form.
func toWire(err error) *wireError { return toWireDepth(err, 0) }

func toWireDepth(err error, depth int) *wireError {
	var fe *fault.FailedError
	var ce *fault.CycleError
	var no *notOwnerError
	var de *fault.DeclaredError
	var pe *fault.PanicError
	switch {
	case errors.As(err, &fe):
		w := &wireError{code: codeFailed, msg: fe.Cause.Error(), actor: fe.Actor, hint: fe.Member}
		if fe.Panic {
			w.cause = &wireError{code: codePanic, msg: fe.Cause.Error()}
		} else if depth < maxCauseDepth {
			if c := toWireDepth(fe.Cause, depth+1); c.code != codeOther {
				w.cause = c
			}
		}
		return w
	case errors.As(err, &de):
		return &wireError{code: codeDeclared, msg: de.Text, name: de.Name, body: de.Body}
	case errors.As(err, &pe):
		return &wireError{code: codePanic, msg: err.Error()}
	case errors.As(err, &ce):
		return &wireError{code: codeCycle, msg: err.Error(), chain: ce.Chain}
	case errors.As(err, &no):
		return &wireError{code: codeNotOwner, msg: err.Error(), hint: no.hint}
	}
	w := &wireError{code: codeOther, msg: err.Error()}
	for _, c := range sentinels {
		if errors.Is(err, c.target) {
			w.code = c.code
			break
		}
	}
	return w
}

// sentinels pairs the errors callers test with errors.Is with their wire
// codes, both ways.
var sentinels = []struct {
	target error
	code   uint8
}{
	{fault.ErrUnknownActor, codeUnknownActor},
	{fault.ErrMailboxFull, codeMailboxFull},
	// Before ErrSystemClosed (a handler cut by its system's close matches
	// both) and ErrUnavailable, which it matches too.
	{fault.ErrOutcomeUnknown, codeOutcomeUnknown},
	{fault.ErrNotAdmitted, codeNotAdmitted}, // before ErrUnavailable, which it matches too
	{fault.ErrSystemClosed, codeClosed},
	{fault.ErrUnavailable, codeUnavailable},
	{errNotOwner, codeNotOwner},
	{context.DeadlineExceeded, codeDeadline},
	{context.Canceled, codeCanceled},
	{fault.ErrUndecodable, codeUndecodable},
	{fault.ErrInvalidRef, codeInvalidRef},
	{fault.ErrNoReply, codeNoReply},
	{fault.ErrIdempotencyConflict, codeIdempotencyConflict},
	{fault.ErrInProgress, codeInProgress},
	{fault.ErrMessageTooLarge, codeTooLarge},
	{wire.ErrMessageTooLarge, codeTooLarge},
}

// fromWire rebuilds an error that errors.Is matches like the original.
func fromWire(w *wireError, from string) error {
	var target error
	switch w.code {
	case codeFailed:
		member := w.hint
		if member == "" {
			// The replier ran it: its address, as Members lists it,
			// without the incarnation that from carries.
			member, _, _ = strings.Cut(from, "#")
		}
		var cause error = errors.New(w.msg)
		panicked := false
		if w.cause != nil {
			cause = fromWire(w.cause, from)
			// Only a cause coded as a panic is this actor's own: a failure
			// passed on (an ask to an actor that panicked) is not.
			if panicked = w.cause.code == codePanic; !panicked {
				cause = &causeError{text: w.msg, err: cause} // the text as on the member that failed
			}
		}
		return &fault.FailedError{Member: member, Actor: w.actor, Cause: cause, Panic: panicked}
	case codePanic:
		// Only the panic's text crosses nodes.
		return &fault.PanicError{Value: strings.TrimPrefix(w.msg, "panic: ")}
	case codeDeclared:
		return &fault.DeclaredError{Name: w.name, Body: bytes.Clone(w.body), Text: w.msg}
	case codeTooLarge:
		target = fault.ErrMessageTooLarge
	case codeCycle:
		return &fault.CycleError{Chain: w.chain}
	case codeNotOwner:
		return &notOwnerError{hint: w.hint}
	case codeOutcomeUnknown:
		return fault.OutcomeUnknown("on %s: %s", from, w.msg)
	case codeNotAdmitted:
		return fmt.Errorf("%w: %w (on %s: %s)", fault.ErrNotAdmitted, fault.ErrUnavailable, from, w.msg)
	case codeClosed:
		// The owner is closing: to this asker its actors are unavailable,
		// not its own system closed.
		target = fault.ErrUnavailable
	default:
		for _, c := range sentinels {
			if c.code == w.code {
				target = c.target
			}
		}
		if target == nil {
			return fmt.Errorf("%s (on %s)", w.msg, from)
		}
	}
	return fmt.Errorf("%w (on %s: %s)", target, from, w.msg)
}

// causeError is a failure's cause that arrived with a code: its own text,
// matching what the code stands for.
type causeError struct {
	text string
	err  error
}

func (e *causeError) Error() string { return e.text }
func (e *causeError) Unwrap() error { return e.err }
