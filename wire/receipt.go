package wire

import (
	"context"
	"sync"

	"github.com/troupe-go/troupe/wire/internal/flow"
)

// Receipt reports the fate of one sent envelope. It resolves once: with nil
// when the peer's layer above has taken the envelope (its credit came
// back), or with an error saying why it never will: the send's context
// ended before the envelope was fully written (the context's error),
// ErrPeerRestarted, ErrPeerDead or ErrClosed.
type Receipt struct {
	done chan struct{}
	once sync.Once
	err  error
	stop func() bool // releases the context watch, if any

	// Guarded by the session's mutex.
	handle flow.Handle
	epoch  uint64
	queued bool
}

func newReceipt() *Receipt { return &Receipt{done: make(chan struct{})} }

func (r *Receipt) resolve(err error) {
	r.once.Do(func() {
		r.err = err
		if r.stop != nil {
			r.stop()
		}
		close(r.done)
	})
}

// Done is closed when the receipt resolves.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Err returns the outcome; nil until Done is closed, and nil after it if
// the envelope was delivered.
func (r *Receipt) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Wait blocks until the receipt resolves or ctx ends, and returns the
// outcome or ctx's error. Giving up waiting does not cancel the envelope;
// the context given to Send does.
func (r *Receipt) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitAll waits until every receipt in rs is resolved or ctx ends, and
// returns ctx's error in the second case (Shutdown's wait).
func waitAll(ctx context.Context, rs []*Receipt) error {
	for _, r := range rs {
		select {
		case <-r.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
