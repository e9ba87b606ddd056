package host

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

// Counter counts events (a prometheus.Counter is one). Inc must be safe
// for concurrent use and cheap: it runs once per message.
type Counter interface{ Inc() }

// Observer takes samples (a prometheus.Observer is one), safe for
// concurrent use.
type Observer interface{ Observe(float64) }

// TypeMeter is where the runtime counts the tells and asks made to one
// actor type through this host's refs: the caller's view, one count per
// call whether the key lives here or on another member. Settings.Meter
// makes one per registered type, so that the hot path holds its counters
// resolved: an Inc, never a lookup by label.
type TypeMeter struct {
	// Tells and Asks count by Outcome; Tells[OutcomeFailed] is never
	// used and may be nil.
	Tells [NumOutcomes]Counter
	Asks  [NumOutcomes]Counter
	// AskSeconds takes the duration of every ask in seconds, from the
	// call to its return, whatever its outcome.
	AskSeconds Observer
}
