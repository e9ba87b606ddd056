package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestCodecsRoundTripCompressibleChunks(t *testing.T) {
	src := bytes.Repeat([]byte("troupe envelope "), 4096)
	for _, name := range []string{CodecS2, CodecZstd} {
		c, err := newCodec(name, DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		z := c.compress(nil, src)
		if len(z) >= len(src) {
			t.Errorf("%s: repetitive chunk did not shrink: %d >= %d", name, len(z), len(src))
		}
		out, err := c.decompress(nil, z, len(src), DefaultMaxFrame)
		if err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s: round trip failed: %v", name, err)
		}
		c.close()
	}
}

func TestDecompressionRefusesBombs(t *testing.T) {
	// A chunk that expands far past the frame limit must fail without
	// producing the expansion.
	big := make([]byte, 4*MinMaxFrame)
	for _, name := range []string{CodecS2, CodecZstd} {
		c, _ := newCodec(name, MinMaxFrame)
		z := c.compress(nil, big)
		if _, err := c.decompress(nil, z, MinMaxFrame, MinMaxFrame); !errors.Is(err, ErrDecompress) {
			t.Errorf("%s: a chunk of 4 frames claimed as one: want ErrDecompress, got %v", name, err)
		}
		if _, err := c.decompress(nil, z, len(big), MinMaxFrame); !errors.Is(err, ErrDecompress) {
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
		{[]string{CodecS2, CodecZstd}, []string{CodecZstd, CodecS2}, CodecS2},
		{[]string{CodecZstd}, []string{CodecS2, CodecZstd}, CodecZstd},
		{nil, []string{CodecS2}, ""},
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
	for i, name := range []string{CodecS2, CodecZstd} {
		c, _ := newCodec(name, MinMaxFrame)
		f.Add(uint8(i), c.compress(nil, sample), uint32(len(sample)))
		f.Add(uint8(i), c.compress(nil, make([]byte, 8*MinMaxFrame)), uint32(MinMaxFrame))
		c.close()
	}
	// Decoders are built once: a fuzz worker calls the target sequentially.
	var codecs [2]codec
	for i, name := range []string{CodecS2, CodecZstd} {
		codecs[i], _ = newCodec(name, MinMaxFrame)
	}
	f.Cleanup(func() { codecs[1].close() })
	f.Fuzz(func(t *testing.T, which uint8, src []byte, rawLen uint32) {
		name := []string{CodecS2, CodecZstd}[which%2]
		c := codecs[which%2]
		if rawLen > MinMaxFrame {
			return // parseData refuses these before any decoder runs
		}
		out, err := c.decompress(nil, src, int(rawLen), MinMaxFrame)
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
