package noderecord

import (
	"errors"
	"reflect"
	"testing"
)

// Any bytes decode to a valid record or fail with one of the decoder's
// errors, never panic; what decodes encodes again and decodes the same.
func FuzzDecode(f *testing.F) {
	for _, r := range []Record{full(), largest(), {Cluster: "c", Node: "n", Role: "r", Incarnation: "i"}} {
		b, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(ordered(f, append(minimal(), "later", []any{1, "x"})...))
	f.Add(ordered(f, "v", 2))
	f.Add([]byte{0x81, 0xa1, 'v', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("Decode failed with an error of no kind it documents: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("Decode returned a record Validate refuses: %v", err)
		}
		b2, err := Encode(r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		r2, err := Decode(b2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoding changed the record:\n%+v\n%+v (%v)", r, r2, err)
		}
	})
}
