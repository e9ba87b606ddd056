package host

import (
	"context"
	"fmt"
	"strings"
)

// Trace is a W3C trace context (https://www.w3.org/TR/trace-context/) as
// it travels with a message: the traceparent and tracestate header
// values, kept as the caller gave them so that a version of traceparent
// newer than 00 passes through unchanged. A message without one carries
// a nil *Trace; a Trace a message points to is never changed.
type Trace struct {
	Parent string // traceparent
	State  string // tracestate; "" for none
}

// The bounds of a trace context.
const (
	// MaxTraceParent is the longest traceparent, in bytes: 55 for
	// version 00, more only for a later version's extra fields.
	MaxTraceParent = 256
	// MaxTraceState is the longest tracestate, in bytes, and
	// MaxTraceStateMembers its most list members, as the specification
	// bounds them.
	MaxTraceState        = 512
	MaxTraceStateMembers = 32
)

// traceParentLen is the length of a version 00 traceparent, and of the
// part of a later version's that version 00 defines.
const traceParentLen = 55

// ValidTrace reports why t cannot be a message's trace context ("" when
// it can): its traceparent must be valid (ValidTraceParent), and its
// tracestate empty or valid (ValidTraceState).
func ValidTrace(t Trace) string {
	if why := ValidTraceParent(t.Parent); why != "" {
		return "traceparent: " + why
	}
	if t.State == "" {
		return ""
	}
	if why := ValidTraceState(t.State); why != "" {
		return "tracestate: " + why
	}
	return ""
}

// ValidTraceParent reports why s is not a traceparent ("" when it is),
// by level 1 of the specification: "00-" then 32 lower-case hex digits
// of trace id, "-", 16 of parent id, "-" and 2 of flags, neither id all
// zeros. A later version (01 to fe) is accepted when its first 55 bytes
// parse so and are the whole value or are followed by "-" (its own
// fields, visible ASCII, up to MaxTraceParent bytes in all); version ff
// is invalid.
func ValidTraceParent(s string) string {
	if len(s) < traceParentLen {
		return fmt.Sprintf("%d bytes, want 55", len(s))
	}
	if !lowerHex(s[0:2]) || s[2] != '-' {
		return "version is not two lower-case hex digits and a dash"
	}
	if s[:2] == "ff" {
		return "version ff"
	}
	if s[:2] == "00" && len(s) != traceParentLen {
		return fmt.Sprintf("%d bytes, want 55 for version 00", len(s))
	}
	if len(s) > MaxTraceParent {
		return fmt.Sprintf("%d bytes, at most %d", len(s), MaxTraceParent)
	}
	traceID, parentID, flags := s[3:35], s[36:52], s[53:55]
	switch {
	case s[35] != '-' || s[52] != '-':
		return "fields are not separated by dashes"
	case !lowerHex(traceID):
		return "trace id is not 32 lower-case hex digits"
	case allZeros(traceID):
		return "trace id is all zeros"
	case !lowerHex(parentID):
		return "parent id is not 16 lower-case hex digits"
	case allZeros(parentID):
		return "parent id is all zeros"
	case !lowerHex(flags):
		return "flags are not two lower-case hex digits"
	}
	if len(s) > traceParentLen {
		if s[traceParentLen] != '-' {
			return "flags are not followed by a dash"
		}
		for i := traceParentLen; i < len(s); i++ {
			if c := s[i]; c < '!' || c > '~' {
				return "not visible ASCII"
			}
		}
	}
	return ""
}

// ValidTraceState reports why s is not a tracestate ("" when it is): at
// most MaxTraceState bytes, a comma-separated list of at most
// MaxTraceStateMembers key=value members (empty ones and spaces or tabs
// around them allowed), each key as the specification spells it
// (lower-case simple keys, or tenant@system) and not repeated, each value
// 1 to 256 printable ASCII bytes other than ',' and '=', not ending in a
// space.
func ValidTraceState(s string) string {
	if len(s) > MaxTraceState {
		return fmt.Sprintf("%d bytes, at most %d", len(s), MaxTraceState)
	}
	var keys [MaxTraceStateMembers]string
	n := 0
	for rest := s; ; {
		member, more, found := strings.Cut(rest, ",")
		member = strings.Trim(member, " \t")
		if member != "" {
			if n == MaxTraceStateMembers {
				return fmt.Sprintf("more than %d list members", MaxTraceStateMembers)
			}
			key, value, ok := strings.Cut(member, "=")
			if !ok {
				return fmt.Sprintf("member %d has no '='", n+1)
			}
			if !traceStateKey(key) {
				return fmt.Sprintf("member %d: invalid key %q", n+1, key)
			}
			if !traceStateValue(value) {
				return fmt.Sprintf("member %d: invalid value", n+1)
			}
			for _, k := range keys[:n] {
				if k == key {
					return fmt.Sprintf("key %q repeated", key)
				}
			}
			keys[n] = key
			n++
		}
		if !found {
			return ""
		}
		rest = more
	}
}

// traceStateKey reports whether k is a tracestate key: a simple key, a
// lower-case letter then up to 255 of [a-z0-9_*/-], or a multi-tenant
// key, tenant@system, with a tenant of a lower-case letter or digit then
// up to 240 of those and a system of a lower-case letter then up to 13.
func traceStateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return keyPart(k, false, 256)
	}
	return keyPart(tenant, true, 241) && keyPart(system, false, 14)
}

// keyPart reports whether s is 1 to max bytes of [a-z0-9_*/-] starting
// with a lower-case letter (or, digitFirst, a digit).
func keyPart(s string, digitFirst bool, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	if c := s[0]; !(c >= 'a' && c <= 'z') && !(digitFirst && c >= '0' && c <= '9') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '_' && c != '-' && c != '*' && c != '/' {
			return false
		}
	}
	return true
}

// traceStateValue reports whether v is a tracestate value: 1 to 256
// bytes of ' ' to '~' other than ',' and '=', the last not a space.
func traceStateValue(v string) bool {
	if len(v) == 0 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c > '~' || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// Handling describes a message an actor is about to handle, for a
// Tracer.
type Handling struct {
	Type, Key string
	Ask       bool
}

// Tracer is called on the actor's goroutine before each message's
// handler runs, with the handler's Context (which carries the message's
// trace context, if any). It returns the trace context the handler runs
// under (the zero Trace: the message's) and a function to call with the
// handler's error once it returned (nil: none).
type Tracer func(ctx context.Context, m Handling) (Trace, func(err error))
