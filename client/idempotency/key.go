package idempotency

import (
	"fmt"
	"strings"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// MaxKeyLen is the longest key accepted, in bytes.
const MaxKeyLen = 255

// ParseKey returns the key an Idempotency-Key header value names: the
// value itself, or the content of a quoted structured-field string
// (RFC 8941: backslash escapes only a quote or a backslash). The key must
// be 1 to MaxKeyLen visible ASCII characters (0x21 to 0x7E; a quoted one
// may also hold spaces).
func ParseKey(v string) (string, error) {
	quoted := len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"'
	if !quoted {
		if err := checkKey(v, false); err != nil {
			return "", err
		}
		return v, nil
	}
	inner := v[1 : len(v)-1]
	if !strings.ContainsAny(inner, `\"`) {
		if err := checkKey(inner, true); err != nil {
			return "", err
		}
		return inner, nil
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch c {
		case '"':
			return "", fmt.Errorf("%w: unescaped quote at byte %d", ErrKeyInvalid, i+1)
		case '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", fmt.Errorf("%w: backslash escapes only a quote or a backslash", ErrKeyInvalid)
			}
			c = inner[i]
		}
		b.WriteByte(c)
	}
	k := b.String()
	if err := checkKey(k, true); err != nil {
		return "", err
	}
	return k, nil
}

func checkKey(k string, spaces bool) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrKeyInvalid)
	}
	if len(k) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrKeyInvalid, len(k), MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 0x21 || c > 0x7e) && !(spaces && c == ' ') {
			return fmt.Errorf("%w: byte %d is %#x, not visible ASCII", ErrKeyInvalid, i, c)
		}
	}
	return nil
}
