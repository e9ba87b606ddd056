package wire

import (
	"fmt"
)

// Default limits. Both sides of a connection must use the same values.
const (
	DefaultMaxFrame   = 256 << 10 // bytes of frame payload
	DefaultMaxMessage = 4 << 20   // bytes of one envelope
	DefaultWindow     = 8 << 20   // bytes of credit per stream, at most

	// MinMaxMessage is the smallest message limit a cluster may choose, so
	// that membership and control envelopes always fit.
	MinMaxMessage = 128 << 10
	// MinMaxFrame is the smallest frame limit: below it the per-frame
	// overhead dominates.
	MinMaxFrame = 4 << 10
	// MaxMaxFrame bounds the frame limit so a single frame cannot hog the
	// link for long.
	MaxMaxFrame = 16 << 20
)

// Limits bound what a peer may send. Cluster members must agree on all
// three; a handshake with different limits is refused with RefusedLimits.
type Limits struct {
	// MaxFrame is the largest frame payload, in bytes, compressed or not,
	// and the largest size a compressed chunk may decompress to.
	// Default 256 KiB; at least 4 KiB, at most 16 MiB.
	MaxFrame int
	// MaxMessage is the largest envelope, in bytes before compression.
	// Default 4 MiB; at least 128 KiB.
	MaxMessage int
	// Window is the most credit of each stream, in uncompressed bytes:
	// how much a peer may make us hold unread per stream. A stream starts
	// with 256 KiB (or Window, if smaller) and grows towards the
	// bandwidth-delay product, never past Window. Default 8 MiB, which
	// carries about 160 MB/s on a 50 ms path; at least MaxFrame.
	Window int
}

// withDefaults returns l with zero fields replaced by defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxFrame == 0 {
		l.MaxFrame = DefaultMaxFrame
	}
	if l.MaxMessage == 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	if l.Window == 0 {
		l.Window = DefaultWindow
	}
	return l
}

// Validate reports the first field that is out of range, after defaults
// are applied to zero fields.
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.MaxFrame < MinMaxFrame || l.MaxFrame > MaxMaxFrame:
		return fmt.Errorf("troupe: Limits.MaxFrame %d out of range [%d, %d]", l.MaxFrame, MinMaxFrame, MaxMaxFrame)
	case l.MaxMessage < MinMaxMessage:
		return fmt.Errorf("troupe: Limits.MaxMessage %d below %d", l.MaxMessage, MinMaxMessage)
	case l.Window < l.MaxFrame:
		return fmt.Errorf("troupe: Limits.Window %d below MaxFrame %d", l.Window, l.MaxFrame)
	}
	return nil
}
