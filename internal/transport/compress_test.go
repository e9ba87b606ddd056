package transport

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

func TestCodecsRoundTripCompressibleChunks(t *testing.T) {
	src := bytes.Repeat([]byte("troupe envelope "), 4096)
	for _, name := range []string{wire.CodecS2, wire.CodecZstd} {
		c, err := newCodec(name, wire.DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		z := c.compress(nil, src)
		if len(z) >= len(src) {
			t.Errorf("%s: repetitive chunk did not shrink: %d >= %d", name, len(z), len(src))
		}
		out, err := c.decompress(nil, z, len(src), wire.DefaultMaxFrame)
		if err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s: round trip failed: %v", name, err)
		}
		c.close()
	}
}

func TestDecompressionRefusesBombs(t *testing.T) {
	// A chunk that expands far past the frame limit must fail without
	// producing the expansion.
	big := make([]byte, 4*wire.MinMaxFrame)
	for _, name := range []string{wire.CodecS2, wire.CodecZstd} {
		c, _ := newCodec(name, wire.MinMaxFrame)
		z := c.compress(nil, big)
		if _, err := c.decompress(nil, z, wire.MinMaxFrame, wire.MinMaxFrame); !errors.Is(err, ErrDecompress) {
			t.Errorf("%s: a chunk of 4 frames claimed as one: want ErrDecompress, got %v", name, err)
		}
		if _, err := c.decompress(nil, z, len(big), wire.MinMaxFrame); !errors.Is(err, ErrDecompress) {
			t.Errorf("%s: a chunk over the limit: want ErrDecompress, got %v", name, err)
		}
		c.close()
	}
}

func TestChooseCodecFollowsTheDialersPreference(t *testing.T) {
	cases := []struct {
		d, a []string
		want string
	}{
		{[]string{wire.CodecS2, wire.CodecZstd}, []string{wire.CodecZstd, wire.CodecS2}, wire.CodecS2},
		{[]string{wire.CodecZstd}, []string{wire.CodecS2, wire.CodecZstd}, wire.CodecZstd},
		{nil, []string{wire.CodecS2}, ""},
		{[]string{"lz4"}, []string{"lz4"}, ""},
	}
	for _, c := range cases {
		if got := chooseCodec(c.d, c.a); got != c.want {
			t.Errorf("chooseCodec(%v, %v) = %q, want %q", c.d, c.a, got, c.want)
		}
	}
}

// FuzzDecompress feeds arbitrary chunks to both decoders with arbitrary
// announced lengths: no panic, and never more than the limit out.
func FuzzDecompress(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	sample := make([]byte, 3000)
	for i := range sample {
		sample[i] = byte(r.IntN(4))
	}
	for i, name := range []string{wire.CodecS2, wire.CodecZstd} {
		c, _ := newCodec(name, wire.MinMaxFrame)
		f.Add(uint8(i), c.compress(nil, sample), uint32(len(sample)))
		f.Add(uint8(i), c.compress(nil, make([]byte, 8*wire.MinMaxFrame)), uint32(wire.MinMaxFrame))
		c.close()
	}
	// Decoders are built once: a fuzz worker calls the target sequentially.
	var codecs [2]codec
	for i, name := range []string{wire.CodecS2, wire.CodecZstd} {
		codecs[i], _ = newCodec(name, wire.MinMaxFrame)
	}
	f.Cleanup(func() { codecs[1].close() })
	f.Fuzz(func(t *testing.T, which uint8, src []byte, rawLen uint32) {
		name := []string{wire.CodecS2, wire.CodecZstd}[which%2]
		c := codecs[which%2]
		if rawLen > wire.MinMaxFrame {
			return // parseData refuses these before any decoder runs
		}
		out, err := c.decompress(nil, src, int(rawLen), wire.MinMaxFrame)
		if err == nil && len(out) != int(rawLen) {
			t.Fatalf("%s: decoded %d bytes, announced %d", name, len(out), rawLen)
		}
	})
}

// FuzzHello feeds arbitrary payloads to the hello decoder.
func FuzzHello(f *testing.F) {
	p, _ := encodeHello(testLocal("10.0.0.1:7000", 42).hello(7))
	f.Add(p)
	f.Add([]byte{0x80})
	f.Add([]byte{0x81, 0xa6, 'c', 'o', 'd', 'e', 'c', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHello(b)
		if err != nil {
			return
		}
		again, err := encodeHello(h)
		if err != nil {
			t.Fatalf("decoded hello does not encode: %v", err)
		}
		h2, err := parseHello(again)
		if err != nil || h2.Cluster != h.Cluster || h2.Node != h.Node || h2.Window != h.Window {
			t.Fatalf("hello does not round-trip: %+v vs %+v (%v)", h, h2, err)
		}
	})
}
