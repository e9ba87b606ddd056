package host

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// RequestID identifies one ask, for correlation only: the handler reads
// it, failures and logs name it, and the asks a handler makes while
// handling it carry it on. It is either made by a host (NewRequestID: the
// host's random 8-byte prefix and its count, 16 bytes shown as 32
// lower-case hex digits) or named by the caller (any string Named
// accepts). The zero RequestID is none: a tell's or a timer's.
//
// A made id stays two numbers until it is shown, so that an ask whose id
// nobody reads costs no formatting and no allocation.
type RequestID struct {
	hi, lo uint64 // a made id: the prefix and the count
	name   string // a named id; hi and lo are then zero
}

// MaxRequestID is the longest id a caller may name, in bytes.
const MaxRequestID = 64

// MadeRequestID returns the made id of prefix hi and count lo, as
// decoded from the wire.
func MadeRequestID(hi, lo uint64) RequestID { return RequestID{hi: hi, lo: lo} }

// NamedRequestID returns the id s as named by a caller, unchecked (see
// ValidRequestID); "" is the zero id.
func NamedRequestID(s string) RequestID { return RequestID{name: s} }

// IsZero reports whether id is none.
func (id RequestID) IsZero() bool { return id.name == "" && id.hi == 0 && id.lo == 0 }

// Made reports whether the id was made by a host, and its two numbers.
func (id RequestID) Made() (hi, lo uint64, ok bool) {
	return id.hi, id.lo, id.name == "" && (id.hi != 0 || id.lo != 0)
}

// Name returns a named id's text; "" for a made or zero id.
func (id RequestID) Name() string { return id.name }

// String returns the id as handlers, errors and logs show it: a named
// id as named, a made one as 32 lower-case hex digits, the zero id as "".
func (id RequestID) String() string {
	if id.name != "" || id.IsZero() {
		return id.name
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], id.hi)
	binary.BigEndian.PutUint64(b[8:], id.lo)
	return hex.EncodeToString(b[:])
}

// Len returns the length of the id as String shows it.
func (id RequestID) Len() int {
	if _, _, made := id.Made(); made {
		return 32
	}
	return len(id.name)
}

// AppendTo appends the id as String shows it to b, without the string.
func (id RequestID) AppendTo(b []byte) []byte {
	if _, _, made := id.Made(); !made {
		return append(b, id.name...)
	}
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], id.hi)
	binary.BigEndian.PutUint64(n[8:], id.lo)
	return hex.AppendEncode(b, n[:])
}

// ShownRequestID returns the id that String shows as b: a made id for 32
// lower-case hex digits (not all zero), else the id named b. Either way
// it shows as b again.
func ShownRequestID(b []byte) RequestID {
	if len(b) == 32 {
		var n [16]byte
		if _, err := hex.Decode(n[:], b); err == nil {
			id := RequestID{hi: binary.BigEndian.Uint64(n[:8]), lo: binary.BigEndian.Uint64(n[8:])}
			if _, _, made := id.Made(); made && string(id.AppendTo(make([]byte, 0, 32))) == string(b) {
				return id // lower-case, as String shows it
			}
		}
	}
	return RequestID{name: string(b)}
}

// ValidRequestID reports why s cannot name a request ("" when it can):
// it must have 1 to MaxRequestID bytes, each visible ASCII ('!' to '~').
func ValidRequestID(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxRequestID {
		return "longer than 64 bytes"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < '!' || c > '~' {
			return "not visible ASCII"
		}
	}
	return ""
}

// newRequestPrefix returns a random prefix for a host's request ids: two
// hosts, in this process or another, share one with a chance of about
// one in 2^64 per pair.
func newRequestPrefix() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand's promise since Go 1.24)
	return binary.BigEndian.Uint64(b[:])
}

// NewRequestID returns a request id no other ask of any host has: this
// host's prefix and the next of its count, one atomic add.
func (h *Host) NewRequestID() RequestID {
	return RequestID{hi: h.reqPrefix, lo: h.reqCount.Add(1)}
}

// MaxIdempotencyKey is the longest idempotency key, in bytes.
const MaxIdempotencyKey = 255

// MaxTenant is the longest tenant that scopes idempotency keys, in bytes.
const MaxTenant = 64

// ScopedIdempotencyKey returns the idempotency key an ask carries and its
// owner keeps: key alone without a tenant, else the tenant, a space, and
// key. A key has no space, so no two (tenant, key) pairs give one string.
func ScopedIdempotencyKey(tenant, key string) string {
	if tenant == "" {
		return key
	}
	return tenant + " " + key
}

// ValidTenant reports why s cannot be a tenant ("" when it can): 1 to
// MaxTenant visible ASCII bytes.
func ValidTenant(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxTenant {
		return fmt.Sprintf("%d bytes, at most %d", len(s), MaxTenant)
	}
	return visibleASCII(s)
}

// ValidScopedIdempotencyKey reports why s cannot be what an ask carries as
// its idempotency key ("" when it can): a valid key, or a valid tenant, a
// space and a valid key (see ScopedIdempotencyKey).
func ValidScopedIdempotencyKey(s string) string {
	tenant, key, scoped := strings.Cut(s, " ")
	if !scoped {
		return ValidIdempotencyKey(s)
	}
	if why := ValidTenant(tenant); why != "" {
		return "tenant: " + why
	}
	return ValidIdempotencyKey(key)
}

// ValidIdempotencyKey reports why s cannot be an ask's idempotency key (""
// when it can): it must have 1 to MaxIdempotencyKey bytes, each visible
// ASCII ('!' to '~'), as the HTTP Idempotency-Key header's value.
func ValidIdempotencyKey(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxIdempotencyKey {
		return fmt.Sprintf("%d bytes, at most %d", len(s), MaxIdempotencyKey)
	}
	return visibleASCII(s)
}

// visibleASCII reports the first byte of s that is not visible ASCII ('!'
// to '~'), "" when there is none.
func visibleASCII(s string) string {
	for i := range len(s) {
		if c := s[i]; c < '!' || c > '~' {
			return fmt.Sprintf("byte %d is not visible ASCII", i)
		}
	}
	return ""
}
