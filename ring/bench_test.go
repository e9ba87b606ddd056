package ring

import (
	"encoding/binary"
	"hash"
	"slices"
	"sync"
	"testing"

	"golang.org/x/crypto/blake2b"
)

var (
	sinkToken Token
	sinkNode  NodeID
	sinkRing  *Ring
)

// BenchmarkDigestVariants measures the ways of getting an 8-byte BLAKE2b
// token for one key, to justify digestToken's choice: Sum512 is the fastest
// that is allocation-free and safe for concurrent use. The New(8) variants
// compute BLAKE2b with an 8-byte output, a different digest, and need a
// pool or a per-goroutine hasher to avoid allocating.
func BenchmarkDigestVariants(b *testing.B) {
	const actorType, key = "counter", "page-views-12345"
	b.Run("Sum512", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf [keyStackSize]byte
			sum := blake2b.Sum512(appendKeyInput(buf[:0], actorType, key))
			sinkToken = Token(binary.BigEndian.Uint64(sum[:8]))
		}
	})
	b.Run("Sum256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf [keyStackSize]byte
			sum := blake2b.Sum256(appendKeyInput(buf[:0], actorType, key))
			sinkToken = Token(binary.BigEndian.Uint64(sum[:8]))
		}
	})
	b.Run("New8PerCall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf [keyStackSize]byte
			h, _ := blake2b.New(8, nil)
			h.Write(appendKeyInput(buf[:0], actorType, key))
			var out [8]byte
			sinkToken = Token(binary.BigEndian.Uint64(h.Sum(out[:0])))
		}
	})
	type scratch struct {
		h   hash.Hash
		in  [keyStackSize]byte
		out [blake2b.Size]byte
	}
	b.Run("New8Pooled", func(b *testing.B) {
		b.ReportAllocs()
		pool := sync.Pool{New: func() any {
			h, _ := blake2b.New(8, nil)
			return &scratch{h: h}
		}}
		for b.Loop() {
			s := pool.Get().(*scratch)
			s.h.Reset()
			s.h.Write(appendKeyInput(s.in[:0], actorType, key))
			sinkToken = Token(binary.BigEndian.Uint64(s.h.Sum(s.out[:0])))
			pool.Put(s)
		}
	})
	b.Run("New8Reused", func(b *testing.B) {
		b.ReportAllocs()
		h, _ := blake2b.New(8, nil)
		s := &scratch{h: h}
		for b.Loop() {
			s.h.Reset()
			s.h.Write(appendKeyInput(s.in[:0], actorType, key))
			sinkToken = Token(binary.BigEndian.Uint64(s.h.Sum(s.out[:0])))
		}
	})
}

func BenchmarkKeyToken(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkToken = KeyToken("counter", "page-views-12345")
	}
}

// BenchmarkOwner100 routes by a precomputed token, as an actor ref does, in a
// ring of 100 members; the tokens cycle through 4096 keys so the search does
// not run on a warm path only.
func BenchmarkOwner100(b *testing.B) {
	r := New(seededMembers(1, 100))
	toks := seededKeyTokens(4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m, err := r.Owner(toks[i&4095], 3, allLive)
		if err != nil {
			b.Fatal(err)
		}
		sinkNode = m
		i++
	}
}

// BenchmarkOwner1000 is BenchmarkOwner100 at 1000 members: the bucket index
// keeps the lookup flat as the ring grows.
func BenchmarkOwner1000(b *testing.B) {
	r := New(seededMembers(1, 1000))
	toks := seededKeyTokens(4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m, err := r.Owner(toks[i&4095], 3, allLive)
		if err != nil {
			b.Fatal(err)
		}
		sinkNode = m
		i++
	}
}

// BenchmarkOwnerOfKey100 hashes the key and then routes, in a ring of 100
// members.
func BenchmarkOwnerOfKey100(b *testing.B) {
	r := New(seededMembers(1, 100))
	b.ReportAllocs()
	for b.Loop() {
		m, err := r.Owner(KeyToken("counter", "page-views-12345"), 3, allLive)
		if err != nil {
			b.Fatal(err)
		}
		sinkNode = m
	}
}

// BenchmarkOwnerDeadPrimary100 routes keys whose primary is dead, so every
// lookup walks on to the second replica.
func BenchmarkOwnerDeadPrimary100(b *testing.B) {
	r := New(seededMembers(1, 100))
	toks := seededKeyTokens(4096)
	dead := make(map[Token]NodeID, len(toks))
	for _, tok := range toks {
		dead[tok] = r.AppendReplicas(nil, tok, 1)[0]
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tok := toks[i&4095]
		d := dead[tok]
		m, err := r.Owner(tok, 3, func(m NodeID) bool { return m != d })
		if err != nil {
			b.Fatal(err)
		}
		sinkNode = m
		i++
	}
}

func BenchmarkAppendReplicas100(b *testing.B) {
	r := New(seededMembers(1, 100))
	toks := seededKeyTokens(4096)
	dst := make([]NodeID, 0, 3)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = r.AppendReplicas(dst[:0], toks[i&4095], 3)
		i++
	}
	sinkNode = dst[0]
}

func BenchmarkNew100(b *testing.B) {
	ms := seededMembers(1, 100)
	b.ReportAllocs()
	for b.Loop() {
		sinkRing = New(ms)
	}
}

func BenchmarkWith100(b *testing.B) {
	ms := seededMembers(1, 101)
	r := New(ms[:100])
	b.ReportAllocs()
	for b.Loop() {
		sinkRing = r.With(ms[100])
	}
}

func BenchmarkWithout100(b *testing.B) {
	ms := seededMembers(1, 100)
	r := New(ms)
	b.ReportAllocs()
	for b.Loop() {
		sinkRing = r.Without(ms[50])
	}
}

func BenchmarkMoves100Join(b *testing.B) {
	ms := seededMembers(1, 101)
	before, after := New(ms[:100]), New(ms)
	b.ReportAllocs()
	for b.Loop() {
		_ = Moves(before, after, 3)
	}
}

var sinkInt int

// BenchmarkSuccessor100 compares the bucket index Ring uses to find a key's
// next position with a plain binary search over the same sorted tokens.
func BenchmarkSuccessor100(b *testing.B) {
	r := New(seededMembers(1, 100))
	toks := seededKeyTokens(4096)
	b.Run("bucket", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sinkInt += r.successor(toks[i&4095])
			i++
		}
	})
	b.Run("binary-search", func(b *testing.B) {
		tokens := tokensOf(r)
		i := 0
		for b.Loop() {
			j, _ := slices.BinarySearch(tokens, toks[i&4095])
			sinkInt += j
			i++
		}
	})
}
