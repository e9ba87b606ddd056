package cluster

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns; the
// ConfigError it comes in names the field.
var ErrInvalidConfig = errors.New("troupe: invalid cluster config")

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
