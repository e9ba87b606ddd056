package cluster

import (
	"errors"
	"fmt"
	"strings"
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

// ErrJoinTimeout is the cause in a *JoinError when the join did not
// complete within Config.JoinTimeout (client.Config.JoinTimeout for a
// client). Retrying can help: the seeds may still be starting.
var ErrJoinTimeout = errors.New("troupe: join timed out")

// ErrJoinRefused is the cause in a *JoinError when every seed refused the
// connection at the handshake (another cluster name, protocol version or
// limits, a certificate the seed does not trust). Retrying cannot help
// until the configuration changes; the *wire.Refused of each seed is in
// the error chain for errors.As.
var ErrJoinRefused = errors.New("troupe: every seed refused the connection")

// SeedError is what one seed last did during a failed join.
type SeedError struct {
	Seed string // the seed's address
	// Err is the last dial or handshake error, a *wire.Refused for a
	// refusal; nil when the seed was reached (or not dialled yet) but did
	// not admit this node, as a member that sees no majority does not.
	Err error
}

// JoinError reports a join (system.Start, client.New) that failed: why
// it ended, and what each seed last did. errors.Is matches Err
// (ErrJoinTimeout, ErrJoinRefused or the context's error) and errors.As
// matches the seeds' errors, such as *wire.Refused.
type JoinError struct {
	Err   error
	Seeds []SeedError
}

func (e *JoinError) Error() string {
	var b strings.Builder
	b.WriteString("troupe: join: ")
	b.WriteString(e.Err.Error())
	for i, s := range e.Seeds {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(s.Seed)
		b.WriteString(": ")
		if s.Err != nil {
			b.WriteString(s.Err.Error())
		} else {
			b.WriteString("reached, but did not admit this node")
		}
	}
	return b.String()
}

// Unwrap returns the cause and every seed's error.
func (e *JoinError) Unwrap() []error {
	out := []error{e.Err}
	for _, s := range e.Seeds {
		if s.Err != nil {
			out = append(out, s.Err)
		}
	}
	return out
}
