package faultnet

import (
	"fmt"
	"math/rand/v2"
)

// Kind is what a fault does to a connection.
type Kind uint8

const (
	// Cut closes the connection abruptly; the peer reads EOF.
	Cut Kind = iota + 1
	// Reset closes with SO_LINGER 0; the peer sees a TCP RST.
	Reset
	// Stall stops delivery in the fault's direction without closing.
	Stall
)

func (k Kind) String() string {
	switch k {
	case Cut:
		return "cut"
	case Reset:
		return "reset"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Direction is the byte stream a fault counts: what this side writes or what
// it reads.
type Direction uint8

const (
	// Write counts bytes written by this side of the connection.
	Write Direction = iota + 1
	// Read counts bytes read by this side of the connection.
	Read
)

func (d Direction) String() string {
	switch d {
	case Write:
		return "write"
	case Read:
		return "read"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Fault schedules one fault: Kind fires when exactly At bytes have passed in
// direction Dir. At = 0 fires before the first byte.
type Fault struct {
	Kind Kind
	Dir  Direction
	At   int64
}

func (f Fault) String() string { return fmt.Sprintf("%s after %d %s bytes", f.Kind, f.At, f.Dir) }

// CutWriteAt cuts the connection once n bytes have been written.
func CutWriteAt(n int64) Fault { return Fault{Kind: Cut, Dir: Write, At: n} }

// CutReadAt cuts the connection once n bytes have been read.
func CutReadAt(n int64) Fault { return Fault{Kind: Cut, Dir: Read, At: n} }

// ResetWriteAt resets the connection once n bytes have been written.
func ResetWriteAt(n int64) Fault { return Fault{Kind: Reset, Dir: Write, At: n} }

// ResetReadAt resets the connection once n bytes have been read.
func ResetReadAt(n int64) Fault { return Fault{Kind: Reset, Dir: Read, At: n} }

// StallWriteAt stops writes once n bytes have been written.
func StallWriteAt(n int64) Fault { return Fault{Kind: Stall, Dir: Write, At: n} }

// StallReadAt stops reads once n bytes have been read.
func StallReadAt(n int64) Fault { return Fault{Kind: Stall, Dir: Read, At: n} }

// NewRand returns the package's seeded generator. The same seed gives the
// same offsets on every run and platform.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Between returns an offset drawn uniformly from [a, b) with rng. Use it to
// cut at a random point of a known region: Between(rng, 0, n) is "during a
// handshake of n bytes". It returns ErrInvalidRange if a < 0 or b <= a.
func Between(rng *rand.Rand, a, b int64) (int64, error) {
	if a < 0 || b <= a {
		return 0, fmt.Errorf("%w: [%d, %d)", ErrInvalidRange, a, b)
	}
	return a + rng.Int64N(b-a), nil
}

// MustBetween is Between for offsets a test knows to be valid; it panics on
// an empty range.
func MustBetween(rng *rand.Rand, a, b int64) int64 {
	n, err := Between(rng, a, b)
	if err != nil {
		panic(err)
	}
	return n
}
