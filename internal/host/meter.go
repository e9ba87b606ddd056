package host

import (
	"sort"
	"sync/atomic"
	"time"
)

// Outcome is how a tell or an ask ended, as the metrics count it. The
// set is fixed, so that the series of a type are too.
type Outcome uint8

// The outcomes, in the order of their label values.
const (
	// OutcomeOK: a tell was queued or sent; an ask got its reply.
	OutcomeOK Outcome = iota
	// OutcomeFailed: the handler answered the ask with an error: it
	// failed (ErrActorFailed) or returned an error its definition
	// declares. Tells never fail so: their handler's errors reach no
	// caller.
	OutcomeFailed
	// OutcomeRefused: the mailbox was full (ErrMailboxFull).
	OutcomeRefused
	// OutcomeTimeout: the caller's context ended, or the ask's deadline
	// passed, before the message was taken or answered.
	OutcomeTimeout
	// OutcomeUndelivered: anything else that kept the message from its
	// handler: the system closed, no member serves the key, the message
	// is too large or does not encode, an ask cycle.
	OutcomeUndelivered

	// NumOutcomes is the number of outcomes.
	NumOutcomes
)

// String returns the outcome's label value.
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeFailed:
		return "failed"
	case OutcomeRefused:
		return "refused"
	case OutcomeTimeout:
		return "timeout"
	case OutcomeUndelivered:
		return "undelivered"
	}
	return "unknown"
}

// AskBounds are the upper bounds of the ask duration histogram's
// buckets: 50 µs (a local ask takes a few) to 10 s (the default ask
// timeout). Read only.
var AskBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// TypeMeter is where the runtime counts the messages of one actor type
// when the system has metrics (Settings.Meter makes one per registered
// type, which the type's runtime holds): plain atomic counters, which
// the system's collector reads at scrape time. On this project's
// machines an atomic add costs about 15 ns and a clock read 70 to
// 100 ns, against 80 ns for a whole local tell and under 3 µs for an
// ask, so the hot paths count as little as their outcome needs:
//
//   - A tell's success is counted where the message is handled, by the
//     goroutine of its actor as it takes it from the mailbox, added to
//     Tells[OutcomeOK] every thousand tells and when the goroutine parks
//     or ends its run: the tells, timer messages and piped answers its
//     actors took, from whichever sender. Its failures are counted where
//     the tell was made: they cost far more than a count. A host that
//     serves no keys (a client, Settings.RemoteOnly) takes no tells: it
//     counts a tell's success in Tells[OutcomeOK] as it sends it, which
//     costs an atomic add beside the encoding and queueing of a remote
//     tell.
//   - An ask is counted where it is made, whatever its outcome, with its
//     duration, as the caller waited. An answered ask costs two atomic
//     adds: its duration's bucket, which counts it, and the sum.
type TypeMeter struct {
	// Tells counts tells by outcome (Tells[OutcomeFailed] is unused).
	Tells [NumOutcomes]atomic.Uint64
	_     [64]byte // the handler's goroutines write Tells, askers the rest
	// AskBuckets[ok][i] counts the asks, answered (ok 1) or not (0),
	// that took at most AskBounds[i] and more than the bound before; the
	// last, those over every bound. The answered asks are the sum of
	// AskBuckets[1].
	AskBuckets [2][len(AskBounds) + 1]atomic.Uint64
	// AskFailures counts the asks that were not answered, by outcome
	// (AskFailures[OutcomeOK] is unused).
	AskFailures [NumOutcomes]atomic.Uint64
	// AskNanos sums the asks' durations in nanoseconds.
	AskNanos atomic.Uint64
}

// ObserveAsk records an ask that took d and ended with o.
func (m *TypeMeter) ObserveAsk(d time.Duration, o Outcome) {
	i := 0
	if d > AskBounds[0] { // most asks take less: one compare
		i = sort.Search(len(AskBounds), func(i int) bool { return d <= AskBounds[i] })
	}
	ok := 0
	if o == OutcomeOK {
		ok = 1
	} else {
		m.AskFailures[o].Add(1)
	}
	m.AskBuckets[ok][i].Add(1)
	m.AskNanos.Add(uint64(max(d, 0)))
}

// Asks returns the asks that ended with o.
func (m *TypeMeter) Asks(o Outcome) uint64 {
	if o != OutcomeOK {
		return m.AskFailures[o].Load()
	}
	var n uint64
	for i := range m.AskBuckets[1] {
		n += m.AskBuckets[1][i].Load()
	}
	return n
}
