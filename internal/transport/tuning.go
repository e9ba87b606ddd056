package transport

import (
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
)

// tuning holds engine timings that are not user configuration. New sets
// the production values; tests change them (export_test.go) before the
// transport makes its first connection, so every goroutine that reads
// them started after the change.
type tuning struct {
	// reliefAfter is how long the reader delivers an envelope itself (one
	// to maxIdleLooks+1 times it, see look) before another goroutine takes
	// over reading: a handler that blocks (its own queue full, or an
	// actor's handler run inline) must not hold the connection's credits,
	// pings and other streams.
	reliefAfter time.Duration
	// grantDelay is how long our receivers let consumed bytes wait for
	// more before granting them (flow's default); tests lengthen it to
	// show that a sender waiting on a receipt never waits it out.
	grantDelay time.Duration
	// shortInlineWrites, when positive, makes inline writes write at most
	// that many bytes, as a full socket would.
	shortInlineWrites int
	// watchArm, if set, replaces the relief watch's timer: tests drive the
	// looks themselves, so the bound on relief is checked in periods
	// rather than in time.
	watchArm func(c *liveConn, periods int64)
	// wrote, if set, is told the data frames of each write of frames to
	// a socket (inline or by the writer), before the write.
	wrote func(dataFrames int)
}

func defaultTuning() tuning {
	return tuning{reliefAfter: time.Millisecond, grantDelay: flow.DefaultGrantDelay}
}
