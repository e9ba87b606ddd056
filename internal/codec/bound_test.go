package codec

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
	"pgregory.net/rapid"
)

type boundInner struct{ X int8 }

type boundMsg struct {
	A int64
	B uint64
	C float64
	D bool
	E [3]int32
	F *boundInner
	G int `msgpack:"a_longer_name_than_the_field"`
	H float32
	I time.Duration
	j uint16
}

// The bound of a fixed-shape type is never below the size of an encoding.
func TestBoundIsAtLeastTheEncodedSize(t *testing.T) {
	c := newCodec[boundMsg]()
	if c.self.bound == unbounded {
		t.Fatal("a struct of numbers is unbounded")
	}
	rapid.Check(t, func(t *rapid.T) {
		m := boundMsg{
			A: rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, -1, 0}).Draw(t, "a"),
			B: rapid.SampledFrom([]uint64{math.MaxUint64, 0, 200}).Draw(t, "b"),
			C: rapid.Float64().Draw(t, "c"),
			D: rapid.Bool().Draw(t, "d"),
			E: [3]int32{math.MinInt32, math.MaxInt32, rapid.Int32().Draw(t, "e")},
			G: rapid.Int().Draw(t, "g"),
			H: float32(rapid.Float64().Draw(t, "h")),
			I: time.Duration(rapid.Int64().Draw(t, "i")),
			j: 7,
		}
		if rapid.Bool().Draw(t, "f") {
			m.F = &boundInner{X: math.MinInt8}
		}
		buf := GetBuffer()
		defer PutBuffer(buf)
		if _, err := c.EncodeTo(buf, m); err != nil {
			t.Fatal(err)
		}
		if n := len(buf.Bytes()); n > c.self.bound {
			t.Fatalf("%+v encodes to %d bytes, above its bound %d", m, n, c.self.bound)
		}
	})
}

func TestTypesOfNoFixedShapeAreUnbounded(t *testing.T) {
	for _, v := range []any{"", []byte(nil), map[string]int(nil), struct{ S string }{}, time.Time{}, (*host.Host)(nil), struct{ R []int }{}} {
		if b := maxEncoded(reflect.TypeOf(v), map[reflect.Type]bool{}); b != unbounded {
			t.Errorf("%T: bound %d, want unbounded", v, b)
		}
	}
}
