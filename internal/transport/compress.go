package transport

import (
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/troupe-go/troupe/wire"
)

// codecOffers lists the codecs a node offers in its hello.
func codecOffers(c wire.Compression) []string {
	switch {
	case c.Disable:
		return nil
	case len(c.Codecs) == 0:
		return []string{wire.CodecS2, wire.CodecZstd}
	default:
		return c.Codecs
	}
}

// compressMinBytes is the chunk size below which data goes out uncompressed.
func compressMinBytes(c wire.Compression) int {
	if c.MinBytes == 0 {
		return wire.DefaultCompressMinBytes
	}
	return c.MinBytes
}

// chooseCodec picks the codec of a connection from both offers.
func chooseCodec(dialerOffers, acceptorOffers []string) string {
	for _, d := range dialerOffers {
		for _, a := range acceptorOffers {
			if d == a && (d == wire.CodecS2 || d == wire.CodecZstd) {
				return d
			}
		}
	}
	return ""
}

// codec compresses and decompresses chunks of one connection. Its methods
// are not safe for concurrent use: the writer compresses, the reader
// decompresses, each with its own codec value.
type codec interface {
	// compress appends the compressed form of src to dst.
	compress(dst, src []byte) []byte
	// decompress decodes src, which must decode to exactly rawLen bytes;
	// rawLen was already checked against the frame limit, and the decoder
	// never produces more than max bytes whatever src claims.
	decompress(dst, src []byte, rawLen, max int) ([]byte, error)
	close()
}

// newCodec returns the codec named name, or nil for "" (no compression).
func newCodec(name string, maxFrame int) (codec, error) {
	switch name {
	case "":
		return nil, nil
	case wire.CodecS2:
		return s2Codec{}, nil
	case wire.CodecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, err
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(maxFrame)), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderLowmem(true))
		if err != nil {
			enc.Close()
			return nil, err
		}
		return &zstdCodec{enc: enc, dec: dec}, nil
	default:
		return nil, fmt.Errorf("troupe: unknown codec %q", name)
	}
}

type s2Codec struct{}

func (s2Codec) compress(dst, src []byte) []byte {
	// Room for the worst case, so that s2 encodes in place rather than
	// into a buffer of its own.
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return append(dst, src...) // too large for s2: never smaller
	}
	dst = slices.Grow(dst, n)
	out := s2.Encode(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+len(out)]
}

func (s2Codec) decompress(dst, src []byte, rawLen, max int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("%w: s2: %v", ErrDecompress, err)
	}
	if n != rawLen || n > max {
		return nil, fmt.Errorf("%w: s2 chunk claims %d bytes, frame said %d (limit %d)", ErrDecompress, n, rawLen, max)
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	out, err := s2.Decode(dst[:n], src)
	if err != nil {
		return nil, fmt.Errorf("%w: s2: %v", ErrDecompress, err)
	}
	return out, nil
}

func (s2Codec) close() {}

type zstdCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

func (z *zstdCodec) compress(dst, src []byte) []byte { return z.enc.EncodeAll(src, dst) }

func (z *zstdCodec) decompress(dst, src []byte, rawLen, max int) ([]byte, error) {
	if rawLen > max {
		return nil, fmt.Errorf("%w: zstd chunk claims %d bytes, limit %d", ErrDecompress, rawLen, max)
	}
	// With the cap limit on, the decoder stops at cap(dst): a bomb cannot
	// grow past the announced length.
	if cap(dst) < rawLen {
		dst = make([]byte, 0, rawLen)
	}
	out, err := z.dec.DecodeAll(src, dst[:0:rawLen])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrDecompress, err)
	}
	if len(out) != rawLen {
		return nil, fmt.Errorf("%w: zstd chunk decoded to %d bytes, frame said %d", ErrDecompress, len(out), rawLen)
	}
	return out, nil
}

func (z *zstdCodec) close() {
	z.enc.Close()
	z.dec.Close()
}
