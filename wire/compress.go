package wire

import "fmt"

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
