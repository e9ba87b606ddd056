package ring

import (
	"encoding/binary"

	"golang.org/x/crypto/blake2b"
)

// VirtualNodes is the number of positions each member occupies on the ring.
const VirtualNodes = 128

// Token is a position on the ring: the first eight bytes, read big-endian, of
// a BLAKE2b-512 digest. Positions wrap around from the largest value to zero.
type Token uint64

// Domain tags: the first input byte says what a digest is for, so a key can
// never be encoded like a virtual node or a member set.
const (
	tagKey     = 'k'
	tagVNode   = 'v'
	tagVersion = 'r'
)

// keyStackSize bounds key encodings hashed from a stack buffer. Longer ones
// (actor type plus key over 239 bytes) are hashed from one heap buffer.
const keyStackSize = 256

// KeyToken returns the ring position of the actor of type actorType with key
// key. The encoding is given byte by byte in the package documentation. It
// does not allocate when len(actorType)+len(key) <= 239.
func KeyToken(actorType, key string) Token {
	size := 1 + 8 + len(actorType) + 8 + len(key)
	var stack [keyStackSize]byte
	var buf []byte
	if size <= keyStackSize {
		buf = stack[:0]
	} else {
		buf = make([]byte, 0, size)
	}
	return digestToken(appendKeyInput(buf, actorType, key))
}

func appendKeyInput(b []byte, actorType, key string) []byte {
	b = append(b, tagKey)
	b = binary.BigEndian.AppendUint64(b, uint64(len(actorType)))
	b = append(b, actorType...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(key)))
	return append(b, key...)
}

// appendVNodeTokens appends the VirtualNodes tokens of m, in index order.
func appendVNodeTokens(dst []Token, m NodeID) []Token {
	in := make([]byte, 0, 1+8+len(m.Addr)+8+8)
	in = append(in, tagVNode)
	in = binary.BigEndian.AppendUint64(in, uint64(len(m.Addr)))
	in = append(in, m.Addr...)
	in = binary.BigEndian.AppendUint64(in, m.Incarnation)
	in = binary.BigEndian.AppendUint64(in, 0)
	idx := in[len(in)-8:]
	for i := range uint64(VirtualNodes) {
		binary.BigEndian.PutUint64(idx, i)
		dst = append(dst, digestToken(in))
	}
	return dst
}

// digestToken reads the first eight bytes of BLAKE2b-512(in) as a big-endian
// integer. Sum512 is the fastest allocation-free variant measured (see
// BenchmarkDigestVariants); BLAKE2b with an 8-byte output length is a
// different function and is not used.
func digestToken(in []byte) Token {
	sum := blake2b.Sum512(in)
	return Token(binary.BigEndian.Uint64(sum[:8]))
}
