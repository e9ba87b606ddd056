package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxNesting bounds how deeply msgpack containers may nest in a membership
// message; the real format nests four levels.
const maxNesting = 16

var errTruncated = errors.New("truncated msgpack value")

// checkMsgpack walks one msgpack value spanning all of b without decoding
// it, and rejects declared lengths that exceed the bytes present. The
// msgpack library trusts an array header when it allocates a slice of
// structs, so a five-byte input could otherwise ask for gigabytes.
func checkMsgpack(b []byte) error {
	rest, err := skipValue(b, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes", len(rest))
	}
	return nil
}

func skipValue(b []byte, depth int) ([]byte, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("nesting deeper than %d", maxNesting)
	}
	if len(b) == 0 {
		return nil, errTruncated
	}
	c, b := b[0], b[1:]
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return b, nil
	case c >= 0x80 && c <= 0x8f:
		return skipItems(b, uint64(c&0x0f)*2, depth)
	case c >= 0x90 && c <= 0x9f:
		return skipItems(b, uint64(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		return skipBytes(b, uint64(c&0x1f))
	}
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		n, b, err := readLen(b, 1)
		if err != nil {
			return nil, err
		}
		return skipBytes(b, n)
	case 0xc5, 0xda:
		n, b, err := readLen(b, 2)
		if err != nil {
			return nil, err
		}
		return skipBytes(b, n)
	case 0xc6, 0xdb:
		n, b, err := readLen(b, 4)
		if err != nil {
			return nil, err
		}
		return skipBytes(b, n)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
		n, b, err := readLen(b, 1<<(c-0xc7))
		if err != nil {
			return nil, err
		}
		return skipBytes(b, n+1)
	case 0xca, 0xce, 0xd2:
		return skipBytes(b, 4)
	case 0xcb, 0xcf, 0xd3:
		return skipBytes(b, 8)
	case 0xcc, 0xd0:
		return skipBytes(b, 1)
	case 0xcd, 0xd1:
		return skipBytes(b, 2)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16 plus type byte
		return skipBytes(b, 1+(1<<(c-0xd4)))
	case 0xdc, 0xde:
		n, b, err := readLen(b, 2)
		if err != nil {
			return nil, err
		}
		if c == 0xde {
			n *= 2
		}
		return skipItems(b, n, depth)
	case 0xdd, 0xdf:
		n, b, err := readLen(b, 4)
		if err != nil {
			return nil, err
		}
		if c == 0xdf {
			n *= 2
		}
		return skipItems(b, n, depth)
	}
	return nil, fmt.Errorf("invalid msgpack byte 0x%02x", c)
}

func skipItems(b []byte, n uint64, depth int) ([]byte, error) {
	// Every item takes at least one byte.
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("container of %d items in %d bytes", n, len(b))
	}
	var err error
	for range n {
		if b, err = skipValue(b, depth+1); err != nil {
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
	default:
		return uint64(binary.BigEndian.Uint32(b)), b[4:], nil
	}
}
