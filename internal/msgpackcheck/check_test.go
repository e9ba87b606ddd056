package msgpackcheck

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckAcceptsWhatMsgpackEncodes(t *testing.T) {
	for _, v := range []any{nil, true, 7, -300, 1.5, "s", []byte{1, 2}, []any{1, "a", []any{map[string]any{"k": []int{1}}}}, map[string]int{"a": 1}} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(b, 4); err != nil {
			t.Fatalf("Check(%v): %v", v, err)
		}
	}
}

func TestCheckRefusesLengthsBeyondTheBytesAndDeepNesting(t *testing.T) {
	for _, b := range [][]byte{
		{},                                   // nothing
		{0xdd, 0xff, 0xff, 0xff, 0xff},       // array32 of 4 G items in no bytes
		{0xdb, 0x7f, 0xff, 0xff, 0xff},       // str32 of 2 GiB
		{0xc6, 0, 0, 0, 9, 1},                // bin32 of 9 bytes in 1
		{0x91, 0x91, 0x91, 0x91, 0x91, 0},    // nested 5 deep, 4 allowed
		{0x01, 0x02},                         // trailing bytes
		{0xc1},                               // never used
		{0xde, 0x00, 0x02, 0x01, 0x01, 0x01}, // map16 of 2 pairs in 3 bytes
	} {
		if err := Check(b, 4); err == nil {
			t.Fatalf("Check(% x) accepted it", b)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte{0x92, 0x01, 0xa1, 'a'})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	// Check judges lengths, not meaning (a map keyed by numbers passes
	// it and fails a decode into map[string]any): what it accepts spans
	// the input exactly, so a decode reads no further than b.
	f.Fuzz(func(t *testing.T, b []byte) {
		if Check(b, 8) != nil || len(b) == 0 {
			return
		}
		if err := Check(append(b[:len(b):len(b)], 0x00), 8); err == nil {
			t.Fatalf("Check accepted % x and the same with a byte more", b)
		}
	})
}
