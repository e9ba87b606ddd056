package replication

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by the errors of [Config.Validate] and
// [Level.Validate]; the message names the field.
var ErrInvalidConfig = errors.New("troupe: invalid replication config")

// ErrNewerFormat is matched (with errors.Is) by the error of opening a
// store written by a newer binary, whose on-disk format this binary does
// not know. The store is left untouched. The error is a [*FormatError].
var ErrNewerFormat = errors.New("troupe: store has a newer on-disk format")

// ErrOlderFormat is matched by the error of opening a store in an on-disk
// format older than this binary reads (a pre-release format, never
// upgraded). The store is left untouched. The error is a [*FormatError].
var ErrOlderFormat = errors.New("troupe: store has an older on-disk format")

// ErrCorrupt is matched by the error of reading a stored record that fails
// its checksum or does not decode, or of opening a store whose format
// record is missing or damaged. Nothing is reset: the operator decides.
var ErrCorrupt = errors.New("troupe: store record is corrupt")

// ErrClosed is returned by a store used after it was closed.
var ErrClosed = errors.New("troupe: store is closed")

// FormatError says which on-disk format a store has and which this binary
// supports. It matches [ErrNewerFormat] when Found is newer than
// Supported, [ErrOlderFormat] when it is older than Oldest.
type FormatError struct {
	// Dir is the store's directory.
	Dir string
	// Found is the format version recorded in the store.
	Found uint32
	// Oldest is the oldest format version this binary reads.
	Oldest uint32
	// Supported is the newest format version this binary reads.
	Supported uint32
}

func (e *FormatError) Error() string {
	if e.Found < e.Oldest {
		return fmt.Sprintf("troupe: store %s has on-disk format %d, this binary reads from %d", e.Dir, e.Found, e.Oldest)
	}
	return fmt.Sprintf("troupe: store %s has on-disk format %d, this binary supports up to %d", e.Dir, e.Found, e.Supported)
}

// Is makes a FormatError match ErrNewerFormat or ErrOlderFormat.
func (e *FormatError) Is(target error) bool {
	return (target == ErrNewerFormat && e.Found > e.Supported) || (target == ErrOlderFormat && e.Found < e.Oldest)
}
