package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// A delta is an edit that turns a base value into a new one, so that a
// write of a large value that changed little crosses the network as what
// changed. Its encoding: the new value's length as a uvarint, then
// operations up to the end of the edit, each three parts: a uvarint
// count of bytes copied from the base at its cursor, a uvarint count of
// base bytes skipped, and the bytes inserted (a uvarint length, then the
// bytes). What is left of the base after the last operation is copied.
// The cursor only moves forward, so applying an edit reads the base
// once and writes the new value once.

// deltaGap is how many equal bytes end a changed run of two values of
// one length: fewer equal bytes cost more as a new operation (three
// integers) than carried as insertions.
const deltaGap = 8

// appendDelta appends to b an edit that turns base into v if it takes
// fewer than limit bytes, and reports whether it does; otherwise b is
// returned unchanged. Two values of one length are compared in place
// (each changed run is one operation). Otherwise the edit is the shorter
// of two: one that replaces what lies between their common prefix and
// suffix, and one that compares them in place where they overlap and
// then adds or drops the longer one's end (a value that grew or shrank at
// its end with changes elsewhere too: a list appended to, and a count
// before it).
func appendDelta(b, base, v []byte, limit int) ([]byte, bool) {
	start := len(b)
	b = binary.AppendUvarint(b, uint64(len(v)))
	p := commonPrefix(base, v)
	s := commonSuffix(base[p:], v[p:])
	mb, mv := base[p:len(base)-s], v[p:len(v)-s]
	if len(mb) == len(mv) {
		b, _, ok := appendInPlace(b, mb, mv, p, start+limit)
		if !ok {
			return b[:start], false
		}
		return b, true
	}
	ops := len(b)
	b = appendOp(b, p, len(mb), mv)
	one := len(b) - ops
	// Aligned at their start: in place over the overlap (given up once
	// as long as the first), then the longer value's end added or the
	// longer base's dropped.
	n := min(len(base), len(v))
	b, cursor, ok := appendInPlace(b, base[p:n], v[p:n], p, ops+2*one)
	if ok {
		b = appendOp(b, n-cursor, len(base)-n, v[n:])
	}
	if two := len(b) - ops - one; ok && two < one {
		copy(b[ops:], b[ops+one:])
		b = b[:ops+two]
	} else {
		b = b[:ops+one]
	}
	if len(b)-start >= limit {
		return b[:start], false
	}
	return b, true
}

// appendInPlace appends to b the operations that turn mb into mv, of one
// length, compared in place; they lie at offset p of their values, the
// first operation copying from cursor 0. It returns b, the cursor after
// the last operation (where what is left of the base starts), and false
// once b would reach max bytes.
func appendInPlace(b, mb, mv []byte, p, max int) ([]byte, int, bool) {
	cursor := 0 // in base, where the next operation copies from
	for i := 0; i < len(mv); {
		i += commonPrefix(mb[i:], mv[i:])
		if i == len(mv) {
			break
		}
		// A changed run ends at deltaGap equal bytes, or at the end. Its
		// bytes go into the edit, so a run that would take it to max is
		// not followed further: values shifted against each other differ
		// everywhere after the shift.
		end, equal := i, 0
		for end < len(mv) && equal < deltaGap {
			if mb[end] == mv[end] {
				equal++
			} else {
				equal = 0
			}
			end++
			if len(b)+end-i >= max {
				return b, cursor, false
			}
		}
		end -= equal
		b = appendOp(b, p+i-cursor, end-i, mv[i:end])
		if len(b) >= max {
			return b, cursor, false
		}
		cursor, i = p+end, end
	}
	return b, cursor, true
}

func appendOp(b []byte, copied, skipped int, inserted []byte) []byte {
	b = binary.AppendUvarint(b, uint64(copied))
	b = binary.AppendUvarint(b, uint64(skipped))
	b = binary.AppendUvarint(b, uint64(len(inserted)))
	return append(b, inserted...)
}

// prefixChunks are the stretches compared at once, longest first, when
// looking for where two values part: bytes.Equal compares a stretch with
// wide loads, and each shorter one narrows down the stretch that differs.
var prefixChunks = [...]int{4096, 256, 16}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, c := range prefixChunks {
		for i+c <= n && bytes.Equal(a[i:i+c], b[i:i+c]) {
			i += c
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix returns the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, c := range prefixChunks {
		for i+c <= n && bytes.Equal(a[len(a)-i-c:len(a)-i], b[len(b)-i-c:len(b)-i]) {
			i += c
		}
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// applyDelta returns the value that edit makes of base. The new value's
// declared length is checked against what base and edit can provide
// before it is allocated, so an edit of n bytes allocates at most
// len(base)+n bytes. A malformed edit gives a *DecodeError matching
// ErrMalformedDelta; base is never changed.
func applyDelta(base, edit []byte) ([]byte, error) {
	d := decoder{b: edit}
	n := d.uvarint("delta length")
	if d.err == nil && n > uint64(len(base))+uint64(len(edit)) {
		d.fail(ErrMalformed, "delta length")
	}
	if d.err != nil {
		return nil, deltaError(d.err)
	}
	out := make([]byte, 0, n)
	cursor := 0
	for d.err == nil && d.off < len(edit) {
		copied := d.uvarint("delta copy")
		skipped := d.uvarint("delta skip")
		inserted := d.bytes("delta insert")
		switch {
		case d.err != nil:
		case copied > uint64(len(base)-cursor):
			d.fail(ErrMalformed, "delta copy past the base")
		case skipped > uint64(len(base)-cursor)-copied:
			d.fail(ErrMalformed, "delta skip past the base")
		case copied+uint64(len(inserted)) > n-uint64(len(out)):
			d.fail(ErrMalformed, "delta longer than declared")
		default:
			out = append(out, base[cursor:cursor+int(copied)]...)
			out = append(out, inserted...)
			cursor += int(copied + skipped)
		}
	}
	if d.err == nil && uint64(len(out)+len(base)-cursor) != n {
		d.fail(ErrMalformed, "delta length differs from the declared one")
	}
	if d.err != nil {
		return nil, deltaError(d.err)
	}
	return append(out, base[cursor:]...), nil
}

// deltaError makes the decoder's error one of a delta: ErrTruncated and
// ErrMalformed both become ErrMalformedDelta, since an edit is opaque to
// the message that carried it.
func deltaError(err error) error {
	var de *DecodeError
	if !errors.As(err, &de) {
		return err
	}
	return &DecodeError{Offset: de.Offset, Err: ErrMalformedDelta, What: de.What}
}
