package cluster

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns; the
// ConfigError it comes in names the field.
var ErrInvalidConfig = errors.New("troupe: invalid cluster config")

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

// ConfigError names the Config field that failed validation and why.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("troupe: invalid cluster config: %s: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidConfig) match.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
