// Package msgpackcheck walks msgpack without decoding it, so that a
// decoder can refuse input whose declared lengths exceed the bytes
// present before the msgpack library sizes allocations from them.
package msgpackcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errTruncated = errors.New("truncated msgpack value")

// Check walks the one msgpack value that must span all of b, without
// decoding it, and refuses any declared length longer than the bytes
// that follow, and containers nested deeper than maxNesting. The msgpack
// library sizes strings, maps and slices from their headers, so without
// this walk a few bytes could make it allocate a megabyte or a map of a
// million entries.
func Check(b []byte, maxNesting int) error {
	rest, err := skipValue(b, maxNesting)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes", len(rest))
	}
	return nil
}

// skipValue skips one value; depth is how many more levels containers
// may nest.
func skipValue(b []byte, depth int) ([]byte, error) {
	if depth < 0 {
		return nil, errors.New("containers nested too deep")
	}
	if len(b) == 0 {
		return nil, errTruncated
	}
	c, b := b[0], b[1:]
	switch {
	case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		return b, nil
	case c <= 0x8f: // fixmap
		return skipItems(b, 2*uint64(c&0x0f), depth)
	case c <= 0x9f: // fixarray
		return skipItems(b, uint64(c&0x0f), depth)
	case c <= 0xbf: // fixstr
		return skipBytes(b, uint64(c&0x1f))
	}
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return b, nil
	case 0xc4, 0xd9: // bin8, str8
		return skipSized(b, 1, 0)
	case 0xc5, 0xda: // bin16, str16
		return skipSized(b, 2, 0)
	case 0xc6, 0xdb: // bin32, str32
		return skipSized(b, 4, 0)
	case 0xc7: // ext8: length, type, data
		return skipSized(b, 1, 1)
	case 0xc8:
		return skipSized(b, 2, 1)
	case 0xc9:
		return skipSized(b, 4, 1)
	case 0xcc, 0xd0: // uint8, int8
		return skipBytes(b, 1)
	case 0xcd, 0xd1:
		return skipBytes(b, 2)
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return skipBytes(b, 4)
	case 0xcb, 0xcf, 0xd3:
		return skipBytes(b, 8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16, after a type byte
		return skipBytes(b, 1+1<<(c-0xd4))
	case 0xdc, 0xdd: // array16, array32
		n, b, err := readLen(b, 2<<(c-0xdc))
		if err != nil {
			return nil, err
		}
		return skipItems(b, n, depth)
	case 0xde, 0xdf: // map16, map32
		n, b, err := readLen(b, 2<<(c-0xde))
		if err != nil {
			return nil, err
		}
		return skipItems(b, 2*n, depth)
	}
	return nil, fmt.Errorf("invalid msgpack byte 0x%02x", c)
}

// skipSized skips a value of a size-byte length and extra bytes more.
func skipSized(b []byte, size int, extra uint64) ([]byte, error) {
	n, b, err := readLen(b, size)
	if err != nil {
		return nil, err
	}
	return skipBytes(b, n+extra)
}

func skipItems(b []byte, n uint64, depth int) ([]byte, error) {
	// Each item takes a byte at least.
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%d items declared in %d bytes", n, len(b))
	}
	var err error
	for range n {
		if b, err = skipValue(b, depth-1); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func skipBytes(b []byte, n uint64) ([]byte, error) {
	if n > uint64(len(b)) {
		return nil, errTruncated
	}
	return b[n:], nil
}

func readLen(b []byte, size int) (uint64, []byte, error) {
	if len(b) < size {
		return 0, nil, errTruncated
	}
	switch size {
	case 1:
		return uint64(b[0]), b[1:], nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), b[2:], nil
	}
	return uint64(binary.BigEndian.Uint32(b)), b[4:], nil
}
