package transport

import (
	"math/bits"
	"sync"
)

// poolMin is the smallest envelope whose buffer comes from the pool:
// below it allocating and zeroing cost less than the bookkeeping.
const poolMin = 32 << 10

// bufPool holds released envelope buffers by size class, so that a
// receiver whose handlers release their payloads reads each large envelope
// into memory that is already mapped and need not be zeroed (allocating a
// fresh buffer for every envelope zeroes it, faults its pages in and makes
// garbage: about a fifth of a bulk receiver's CPU).
//
// Classes are four per power of two (5/8, 6/8, 7/8 and 8/8 of it), so a
// buffer wastes at most a fifth of its size. The pool keeps at most max
// bytes; beyond that released buffers are left to the collector. Unlike a
// sync.Pool it does not drop buffers at random, so reuse is predictable.
type bufPool struct {
	mu      sync.Mutex
	free    map[int][][]byte // by class size
	held    int              // bytes in free
	max     int
	maxSize int // largest class pooled
}

func newBufPool(maxSize, max int) *bufPool {
	return &bufPool{free: map[int][][]byte{}, max: max, maxSize: maxSize}
}

// classSize returns the size of the class that holds an n-byte buffer.
func classSize(n int) int {
	if n <= 8 {
		return n
	}
	e := bits.Len(uint(n - 1)) // 2^(e-1) < n <= 2^e
	step := 1 << (e - 3)
	return (n + step - 1) / step * step
}

// pooled reports whether buffers of n bytes come from the pool.
func (p *bufPool) pooled(n int) bool { return n >= poolMin && n <= p.maxSize }

// get returns an empty buffer with room for n bytes, n pooled: a released
// one of n's class if there is one, else a new one of the class's size.
func (p *bufPool) get(n int) []byte {
	c := classSize(n)
	p.mu.Lock()
	if fs := p.free[c]; len(fs) > 0 {
		b := fs[len(fs)-1]
		fs[len(fs)-1] = nil
		p.free[c] = fs[:len(fs)-1]
		p.held -= c
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	return make([]byte, 0, c)
}

// put takes back a buffer nobody uses any more. Buffers whose capacity is
// not a pooled class size (not ours, or a sub-slice) are left alone.
func (p *bufPool) put(b []byte) {
	c := cap(b)
	if !p.pooled(c) || classSize(c) != c {
		return
	}
	p.mu.Lock()
	if p.held+c <= p.max {
		p.free[c] = append(p.free[c], b[:0])
		p.held += c
	}
	p.mu.Unlock()
}
