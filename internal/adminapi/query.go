package adminapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/troupe-go/troupe/noderecord"
)

// statuses are the values of a member's status: a member still joining
// is "joining" whatever its record's status.
var statuses = [...]string{"alive", "suspect", "dead", "leaving", "joining"}

// Page sizes of /members.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// maxCursorAddr bounds the address a cursor carries (membership bounds
// addresses to 256 bytes; a little room on top).
const maxCursorAddr = 512

// cursorPrefix starts every cursor: the version of its encoding, so that
// a later one can be told apart.
const cursorPrefix = "a1."

// paramError is a query that cannot be served: its code and message.
type paramError struct {
	code string
	msg  string
}

func (e *paramError) Error() string { return e.msg }

func badParam(format string, args ...any) *paramError {
	return &paramError{code: CodeBadParameter, msg: fmt.Sprintf(format, args...)}
}

// query parses raw, refusing parameters outside allowed: a filter the
// server does not know must not be ignored silently.
func query(raw string, allowed ...string) (url.Values, *paramError) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badParam("the query string does not parse")
	}
	for name := range q {
		if !slices.Contains(allowed, name) {
			return nil, badParam("unknown parameter %q (this endpoint takes %s)", clip(name), allowedList(allowed))
		}
	}
	return q, nil
}

func allowedList(allowed []string) string {
	if len(allowed) == 0 {
		return "none"
	}
	return strings.Join(allowed, ", ")
}

// clip bounds what an error repeats of a client's input.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// single returns the one value of name ("" when absent), refusing
// repeats.
func single(q url.Values, name string) (string, *paramError) {
	switch v := q[name]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", badParam("parameter %q is repeated", name)
}

// membersQuery is what /members filters and pages by.
type membersQuery struct {
	statuses []string // empty: any
	typ      string   // empty: any
	role     string   // empty: any
	labels   []label  // every one must match; empty: any
	limit    int
	after    string // the address after which the page starts; "" from the first
}

// label is a label filter: key=value.
type label struct{ key, value string }

// parseMembersQuery parses the query of /members.
func parseMembersQuery(raw string) (membersQuery, *paramError) {
	mq := membersQuery{limit: defaultLimit}
	q, perr := query(raw, "status", "type", "role", "label", "limit", "after")
	if perr != nil {
		return mq, perr
	}
	for _, v := range q["status"] {
		for s := range strings.SplitSeq(v, ",") {
			if !slices.Contains(statuses[:], s) {
				return mq, badParam("status %q is not one of %s", clip(s), strings.Join(statuses[:], ", "))
			}
			if !slices.Contains(mq.statuses, s) {
				mq.statuses = append(mq.statuses, s)
			}
		}
	}
	var err *paramError
	if mq.typ, err = single(q, "type"); err != nil {
		return mq, err
	}
	if _, ok := q["type"]; ok && mq.typ == "" {
		return mq, badParam("parameter \"type\" is empty")
	}
	if mq.role, err = single(q, "role"); err != nil {
		return mq, err
	}
	if _, ok := q["role"]; ok {
		if verr := noderecord.ValidateRole(mq.role); verr != nil {
			return mq, badParam("role %q is not a record's role: it %s", clip(mq.role), why(verr))
		}
	}
	if mq.labels, err = parseLabels(q["label"]); err != nil {
		return mq, err
	}
	lim, err := single(q, "limit")
	if err != nil {
		return mq, err
	}
	if _, ok := q["limit"]; ok {
		n, perr := strconv.Atoi(lim)
		if perr != nil || n < 1 || n > maxLimit {
			return mq, badParam("limit %q is not a whole number from 1 to %d", clip(lim), maxLimit)
		}
		mq.limit = n
	}
	after, err := single(q, "after")
	if err != nil {
		return mq, err
	}
	if _, ok := q["after"]; ok {
		addr, ok := decodeCursor(after)
		if !ok {
			return mq, badParam("after is not a cursor this server gave (pass a response's next unchanged)")
		}
		mq.after = addr
	}
	return mq, nil
}

// parseLabels parses label filters, each "key=value" (the value may be
// empty or hold '='), repeats dropped. More distinct filters than a
// record has labels could never match: refused.
func parseLabels(vs []string) ([]label, *paramError) {
	var ls []label
	for _, v := range vs {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, badParam("label %q is not key=value", clip(v))
		}
		if err := noderecord.ValidateLabels(map[string]string{k: ""}); err != nil {
			return nil, badParam("label %q: the key %s", clip(v), why(err))
		}
		if err := noderecord.ValidateLabels(map[string]string{k: val}); err != nil {
			return nil, badParam("label %q: the value %s", clip(v), why(err))
		}
		if l := (label{k, val}); !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	if len(ls) > noderecord.MaxLabels {
		return nil, badParam("%d label filters: a record has at most %d labels", len(ls), noderecord.MaxLabels)
	}
	return ls, nil
}

// why is what a record's validation error says of the field, without
// naming it: "is empty", "is over its limit (70 bytes, limit 63)".
func why(err error) string {
	var fe *noderecord.FieldError
	switch {
	case !errors.As(err, &fe):
		return "is not valid"
	case fe.Limit > 0:
		return fmt.Sprintf("is over its limit (%d %s, limit %d)", fe.Size, fe.Reason, fe.Limit)
	}
	return fe.Reason
}

// encodeCursor returns the cursor of the page after addr. It is opaque
// to clients: they pass a response's next back as after, unchanged.
func encodeCursor(addr string) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(addr))
}

// decodeCursor returns the address a cursor of encodeCursor holds. Only
// what encodeCursor can produce decodes: one text has one meaning.
func decodeCursor(c string) (string, bool) {
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	// The decoder skips line breaks: refuse them rather than accept two
	// spellings of a cursor.
	if !ok || rest == "" || len(rest) > base64.RawURLEncoding.EncodedLen(maxCursorAddr) || strings.ContainsAny(rest, "\r\n") {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}
