package codec

import (
	"testing"
)

// Messages of the codec benchmarks: one like the remote-tell benchmark's
// rAdd, and one with a field of each common kind.
type (
	benchMsg interface{ benchMsg() }
	benchAdd struct{ N int }
	benchBig struct {
		ID    string
		Qty   int32
		Price float64
		Paid  bool
		Note  []byte
		Seq   uint64
	}
)

func (benchAdd) benchMsg() {}
func (benchBig) benchMsg() {}

// benchCodec encodes and decodes msgs in turn, as a sender and a
// receiver of a stream of tells do (one decoder for a run).
func benchCodec(b *testing.B, msgs []benchMsg) {
	c := newCodec[benchMsg]()
	if probs := c.register("bench", []any{benchAdd{}, benchBig{}}); len(probs) > 0 {
		b.Fatal(probs[0])
	}
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf := getEncodeBuffer()
		name, err := c.encodeTo(buf, msgs[i%len(msgs)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decodeWith[benchMsg](d, c, name, buf.w.b); err != nil {
			b.Fatal(err)
		}
		putEncodeBuffer(buf)
	}
}

func BenchmarkCodecSmall(b *testing.B) {
	benchCodec(b, []benchMsg{benchAdd{N: 1}, benchAdd{N: 1000}})
}

func BenchmarkCodecBig(b *testing.B) {
	benchCodec(b, []benchMsg{benchBig{ID: "order-12345", Qty: 3, Price: 9.99, Paid: true, Note: []byte("gift"), Seq: 1 << 40}})
}
