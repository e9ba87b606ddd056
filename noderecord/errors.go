package noderecord

import (
	"errors"
	"fmt"
)

// ErrInvalidRecord is wrapped by every error Validate returns; the
// *FieldError it comes in names the field.
var ErrInvalidRecord = errors.New("troupe: invalid node record")

// ErrTooLarge is wrapped, besides ErrInvalidRecord, by a *FieldError for
// a field over its limit, and by Decode for input over MaxEncodedBytes.
var ErrTooLarge = errors.New("troupe: node record over its limit")

// ErrMalformed is returned by Decode for bytes that are not a node
// record: not msgpack, the wrong shape, or a field of the wrong type.
var ErrMalformed = errors.New("troupe: malformed node record")

// ErrUnsupportedVersion is returned by Decode for a record written in a
// format newer than FormatVersion: this binary is older than the writer
// and must not guess.
var ErrUnsupportedVersion = errors.New("troupe: node record format too new")

// ErrInvalidConfig is wrapped by every error Timings.Validate returns;
// the *ConfigError it comes in names the field.
var ErrInvalidConfig = errors.New("troupe: invalid node record config")

// ErrNotFound is returned by Store.Get when no live record has the key:
// none was put, it was removed, or its lease lapsed.
var ErrNotFound = errors.New("troupe: node record not found")

// ErrTimeout is returned by a store call whose context's deadline passed
// before the backend answered. The context's error is wrapped too. The
// call may have taken effect; every call is safe to retry, as the
// ordering rule makes a repeated Put a duplicate.
var ErrTimeout = errors.New("troupe: node record store timed out")

// ErrUnavailable is returned by a store call that the backend refused or
// could not be reached for. Retry later; meanwhile the caller fails
// closed (readiness false, no authoritative answers).
var ErrUnavailable = errors.New("troupe: node record store unavailable")

// ErrCompacted is returned by Store.Watch or Watcher.Next when the
// revision to resume from is no longer in the store's history. The caller
// relists: takes a Snapshot and watches again from its revision.
var ErrCompacted = errors.New("troupe: node record revision compacted")

// ErrInvalidRevision is returned for a revision the store did not issue.
var ErrInvalidRevision = errors.New("troupe: invalid node record revision")

// ErrClosed is returned by every call on a closed store or watcher.
var ErrClosed = errors.New("troupe: node record store closed")

// FieldError names the Record field that failed validation and why. It
// matches ErrInvalidRecord, and ErrTooLarge when the field is over its
// limit (Limit > 0).
type FieldError struct {
	// Field is the field's name in Go ("Labels[zone]" for a label).
	Field  string
	Reason string
	// Size and Limit are set for a field over its limit: its size and
	// the most allowed, in bytes or entries as Reason says.
	Size, Limit int
}

func (e *FieldError) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("troupe: invalid node record: %s: %s (%d, limit %d)", e.Field, e.Reason, e.Size, e.Limit)
	}
	return fmt.Sprintf("troupe: invalid node record: %s: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is match ErrInvalidRecord, and ErrTooLarge for a
// field over its limit.
func (e *FieldError) Unwrap() []error {
	if e.Limit > 0 {
		return []error{ErrInvalidRecord, ErrTooLarge}
	}
	return []error{ErrInvalidRecord}
}

// ConfigError names the Timings field that failed validation and why.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("troupe: invalid node record config: %s: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidConfig) match.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
