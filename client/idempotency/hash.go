package idempotency

import (
	"encoding/binary"
	"hash"
	"net/url"
	"slices"

	"golang.org/x/crypto/blake2b"
)

// Hash identifies a request's content: two requests with the same key
// are the same request when their hashes are equal.
type Hash [32]byte

// RequestHash hashes method, path, query and body canonically: each field
// length-prefixed, the query's parameters sorted by name and the values
// of one name kept in their order, so that two encodings of one query
// ("a=1&b=2", "b=2&a=1") hash alike and no two different requests can be
// made to collide by moving bytes between fields.
func RequestHash(method, path string, query url.Values, body []byte) Hash {
	h, _ := blake2b.New256(nil) // a nil key never fails
	field(h, []byte(method))
	field(h, []byte(path))
	names := make([]string, 0, len(query))
	for name := range query {
		names = append(names, name)
	}
	slices.Sort(names)
	count(h, len(names))
	for _, name := range names {
		field(h, []byte(name))
		vals := query[name]
		count(h, len(vals))
		for _, v := range vals {
			field(h, []byte(v))
		}
	}
	field(h, body)
	var out Hash
	h.Sum(out[:0])
	return out
}

func field(h hash.Hash, b []byte) {
	count(h, len(b))
	h.Write(b)
}

func count(h hash.Hash, n int) {
	var p [binary.MaxVarintLen64]byte
	h.Write(p[:binary.PutUvarint(p[:], uint64(n))])
}
