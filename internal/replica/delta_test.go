package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// deltaPairs are base and new values that a delta must carry across:
// empty values, in-place changes at the start, middle and end, growth and
// shrinking, and a value replaced entirely.
func deltaPairs() [][2][]byte {
	big := make([]byte, 4096)
	for i := range big {
		big[i] = byte(i * 7)
	}
	change := func(at ...int) []byte {
		b := bytes.Clone(big)
		for _, i := range at {
			b[i]++
		}
		return b
	}
	return [][2][]byte{
		{nil, nil},
		{nil, []byte("x")},
		{[]byte("x"), nil},
		{big, big},
		{big, change(0)},
		{big, change(4095)},
		{big, change(2000)},
		{big, change(10, 11, 12, 30, 2000, 2003, 4000)},
		{big, append(bytes.Clone(big), "tail"...)},
		{big, append([]byte("head"), big...)},
		{big, big[:4000]},
		{big, append(bytes.Clone(big[:2000]), big[2100:]...)},
		{big, append(change(5, 2000), "tail"...)},
		{big, change(5, 3000)[:3500]},
		{big, bytes.Repeat([]byte{1}, 4096)},
	}
}

func TestADeltaRebuildsTheNewValueExactly(t *testing.T) {
	for i, pair := range deltaPairs() {
		base, v := pair[0], pair[1]
		edit, ok := appendDelta(nil, base, v, len(base)+len(v)+64)
		if !ok {
			t.Fatalf("pair %d: no delta within a limit above both values", i)
		}
		got, err := applyDelta(base, edit)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("pair %d: applying the delta gave %d bytes, %v; want the %d bytes of the new value", i, len(got), err, len(v))
		}
	}
}

// A one-byte change in 64 KiB costs a few bytes, and a value changed
// everywhere is no delta at all under the limit of half the value.
func TestADeltaIsSmallForASmallChangeAndRefusedForALargeOne(t *testing.T) {
	base := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range base {
		base[i] = byte(rng.Uint32())
	}
	v := bytes.Clone(base)
	v[40000] ^= 0xff
	edit, ok := appendDelta(nil, base, v, len(v)/2)
	if !ok || len(edit) > 16 {
		t.Fatalf("a one-byte change in 64 KiB gave a delta of %d bytes (ok %v), want at most 16", len(edit), ok)
	}
	other := make([]byte, len(base))
	for i := range other {
		other[i] = byte(rng.Uint32())
	}
	if edit, ok := appendDelta([]byte("keep"), base, other, len(other)/2); ok || string(edit) != "keep" {
		t.Fatalf("a value changed everywhere gave a delta (%d bytes, ok %v), want none and the buffer unchanged", len(edit), ok)
	}
}

// A value that grew or shrank at its end while a few bytes near its start
// changed (a list appended to, and its count before it: a record of kept
// answers) goes as the changes and the end, not as everything between
// the first change and the end.
func TestADeltaOfAValueChangedAtItsHeadAndItsEndIsSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := make([]byte, 8<<10)
	for i := range base {
		base[i] = byte(rng.Uint32())
	}
	head := func(v []byte) []byte {
		v[1] ^= 0x01 // the state
		v[9] ^= 0x10 // the count
		return v
	}
	tail := make([]byte, 60)
	for i := range tail {
		tail[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name string
		v    []byte
		most int
	}{
		{"grown", append(head(bytes.Clone(base)), tail...), len(tail) + 24},
		{"shrunk", head(bytes.Clone(base[:len(base)-500])), 24},
		// Grown at its start: the aligned edit does not help, the
		// prefix-and-suffix one does.
		{"grown at its start", append(bytes.Clone(tail), base...), len(tail) + 16},
	} {
		edit, ok := appendDelta(nil, base, c.v, len(c.v)/2)
		if !ok || len(edit) > c.most {
			t.Errorf("%s: a delta of %d bytes (ok %v), want at most %d", c.name, len(edit), ok, c.most)
			continue
		}
		if got, err := applyDelta(base, edit); err != nil || !bytes.Equal(got, c.v) {
			t.Errorf("%s: the delta rebuilt %d bytes, %v; want the %d of the value", c.name, len(got), err, len(c.v))
		}
	}
}

// Looking for a delta costs about what the edit found takes, not what
// the values take: a value shifted against its base by an insertion in
// its middle differs in place everywhere after it, which the aligned edit
// gives up on at the length of the other (a few bytes), without copying
// the rest into the buffer.
func TestADeltaOfAShiftedValueCopiesNoMoreThanItsEdit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := make([]byte, 1<<20)
	for i := range base {
		base[i] = byte(rng.Uint32())
	}
	v := slices.Concat(base[:500_000], []byte("ten bytes!"), base[500_000:])
	b := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(3, func() {
		edit, ok := appendDelta(b, base, v, len(v)/2)
		if !ok || len(edit) > 32 {
			t.Fatalf("an insertion of 10 bytes gave a delta of %d bytes (ok %v), want at most 32", len(edit), ok)
		}
	})
	if allocs != 0 {
		t.Fatalf("looking for the delta allocated %v times, want none (the buffer has room for the edit)", allocs)
	}
}

// Malformed edits are refused with ErrMalformedDelta at a byte offset, and
// the base is left alone.
func TestAMalformedDeltaIsRefusedWithATypedError(t *testing.T) {
	base := []byte("0123456789")
	op := func(b []byte, copied, skipped int, ins string) []byte {
		return appendOp(b, copied, skipped, []byte(ins))
	}
	length := func(n int) []byte { return binary.AppendUvarint(nil, uint64(n)) }
	for _, tc := range []struct {
		what string
		edit []byte
	}{
		{"empty", nil},
		{"overlong length", []byte{0x80, 0x00}},
		{"length beyond base and edit", length(1000)},
		{"copy past the base", op(length(10), 11, 0, "")},
		{"skip past the base", op(length(5), 5, 6, "")},
		{"insert longer than the edit", append(length(12), 0, 0, 5, 'a')},
		{"longer than declared", op(length(10), 10, 0, "x")},
		{"shorter than declared", op(length(11), 0, 0, "")},
		{"truncated operation", append(length(10), 1)},
	} {
		before := bytes.Clone(base)
		got, err := applyDelta(base, tc.edit)
		var de *DecodeError
		if !errors.Is(err, ErrMalformedDelta) || !errors.As(err, &de) {
			t.Fatalf("%s: applied as %q, %v; want a *DecodeError matching ErrMalformedDelta", tc.what, got, err)
		}
		if !bytes.Equal(base, before) {
			t.Fatalf("%s: the base changed to %q", tc.what, base)
		}
	}
}

func FuzzDelta(f *testing.F) {
	for _, pair := range deltaPairs() {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, base, v []byte) {
		edit, ok := appendDelta(nil, base, v, len(v)/2)
		if !ok {
			edit, ok = appendDelta(nil, base, v, len(base)+len(v)+64)
			if !ok {
				t.Fatalf("no delta from %d to %d bytes within a limit above both", len(base), len(v))
			}
		}
		got, err := applyDelta(base, edit)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("apply(base, diff(base, v)) = %x, %v; want %x", got, err, v)
		}
	})
}

// FuzzApplyDelta feeds arbitrary edits: each gives a value or a typed
// error, and allocates no more than the base and the edit can make.
func FuzzApplyDelta(f *testing.F) {
	for _, pair := range deltaPairs() {
		edit, _ := appendDelta(nil, pair[0], pair[1], 1<<20)
		f.Add(pair[0], edit)
	}
	f.Add([]byte("0123456789"), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, base, edit []byte) {
		var got []byte
		var err error
		if n := allocated(func() { got, err = applyDelta(base, edit) }); n > uint64(len(base)+len(edit))+allocSlack {
			t.Fatalf("applying %d bytes to %d allocated %d bytes", len(edit), len(base), n)
		}
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformedDelta) {
				t.Fatalf("untyped delta error %v", err)
			}
			return
		}
		if uint64(len(got)) > uint64(len(base)+len(edit)) {
			t.Fatalf("a %d-byte edit of %d bytes made %d", len(edit), len(base), len(got))
		}
	})
}
