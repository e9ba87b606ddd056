package wire

import (
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression codec names, as offered in the hello.
const (
	CodecZstd = "zstd"
	CodecS2   = "s2"
)

// DefaultCompressMinBytes is the chunk size below which data frames go out
// uncompressed.
const DefaultCompressMinBytes = 1024

// Compression configures what a node offers. The codec used on a
// connection is the first of the dialer's offers that the acceptor also
// offers; if none is common the connection runs uncompressed.
type Compression struct {
	// Codecs lists the codecs to offer, most preferred first: CodecS2,
	// CodecZstd. Default: s2 then zstd.
	Codecs []string
	// Disable offers no codec at all; Codecs is then ignored.
	Disable bool
	// MinBytes is the chunk size, in uncompressed bytes, below which a
	// chunk is sent uncompressed. Default 1 KiB. A chunk that does not
	// shrink is sent uncompressed whatever its size.
	MinBytes int
}

func (c Compression) offers() []string {
	switch {
	case c.Disable:
		return nil
	case len(c.Codecs) == 0:
		return []string{CodecS2, CodecZstd}
	default:
		return c.Codecs
	}
}

func (c Compression) minBytes() int {
	if c.MinBytes == 0 {
		return DefaultCompressMinBytes
	}
	return c.MinBytes
}

// Validate reports an unknown codec name or a negative threshold.
func (c Compression) Validate() error {
	for i, name := range c.Codecs {
		if name != CodecS2 && name != CodecZstd {
			return fmt.Errorf("troupe: Compression.Codecs[%d]: unknown codec %q", i, name)
		}
	}
	if c.MinBytes < 0 {
		return fmt.Errorf("troupe: Compression.MinBytes %d is negative", c.MinBytes)
	}
	return nil
}

// chooseCodec picks the codec of a connection from both offers.
func chooseCodec(dialerOffers, acceptorOffers []string) string {
	for _, d := range dialerOffers {
		for _, a := range acceptorOffers {
			if d == a && (d == CodecS2 || d == CodecZstd) {
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
	case CodecS2:
		return s2Codec{}, nil
	case CodecZstd:
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
	out := s2.Encode(dst[len(dst):cap(dst)], src)
	return append(dst, out...)
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
