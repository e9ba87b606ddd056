package transport

import (
	"context"
	"sync"

	"github.com/troupe-go/troupe/internal/transport/flow"
)

// Receipt reports the fate of one sent envelope. It resolves once: with nil
// when the peer's layer above has taken the envelope (its credit came
// back), or with an error saying why it never will: the send's context
// ended before the envelope was fully written (the context's error),
// ErrPeerRestarted, ErrPeerDead or ErrClosed.
type Receipt struct {
	// The channel is made only once somebody asks for it (Done, Wait):
	// most senders (the router's) never look at their receipts, and the
	// channel was one of a send's five allocations.
	mu       sync.Mutex
	done     chan struct{} // nil until asked for; closed on resolution
	resolved bool
	err      error
	stop     func() bool // releases the context watch, if any

	// Set before the receipt is returned and never changed.
	s *session

	// Guarded by the session's mutex.
	handle  flow.Handle
	epoch   uint64
	size    int      // the envelope's length
	queued  bool     // in the session's queued map
	waited  bool     // Done or Wait asked for the outcome
	written bool     // its last frame was written; end is set
	st      StreamID // its stream, once written
	end     int64    // its stream position's end, once written
	post    bool     // sent by Post: nobody else holds it (see recycle)
	payload []byte   // Post's: the transport's once sent, reused once consumed
}

func newReceipt() *Receipt { return &Receipt{} }

// getPosted returns a receipt for an envelope sent with Post, reusing
// one of t.posted if it has any.
func (t *Transport) getPosted() *Receipt {
	if r, ok := t.posted.Get().(*Receipt); ok {
		return r
	}
	return &Receipt{post: true}
}

// recycle takes back a resolved receipt of Post's, unless Shutdown may
// hold it (it gathers the pending receipts once draining is set).
//
// A Post's payload is the transport's: once the peer consumed it, no
// frame, resend entry or replay refers to it any more (each frame of it
// ended at or before what the peer consumed), so its buffer goes to the
// pool Buffer draws from.
func (r *Receipt) recycle(t *Transport) {
	if !r.post || t.draining.Load() {
		return
	}
	if r.payload != nil {
		t.bufs.put(r.payload)
	}
	*r = Receipt{post: true}
	t.posted.Put(r)
}

// closedChan is the Done channel of receipts resolved before anybody
// asked for one.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// resolve settles the receipt; only the first call counts.
func (r *Receipt) resolve(err error) {
	r.mu.Lock()
	if r.resolved {
		r.mu.Unlock()
		return
	}
	r.resolved, r.err = true, err
	stop := r.stop
	if r.done != nil {
		close(r.done)
	}
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Done is closed when the receipt resolves.
func (r *Receipt) Done() <-chan struct{} {
	r.mu.Lock()
	if r.done != nil {
		d := r.done
		r.mu.Unlock()
		return d
	}
	if r.resolved {
		r.mu.Unlock()
		return closedChan
	}
	d := make(chan struct{})
	r.done = d
	r.mu.Unlock()
	if r.s != nil {
		// Somebody waits: the session makes sure the credit that
		// resolves the receipt is not left to the peer's grant delay.
		r.s.waitedOn(r)
	}
	return d
}

// Err returns the outcome; nil until Done is closed, and nil after it if
// the envelope was delivered.
func (r *Receipt) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Wait blocks until the receipt resolves or ctx ends, and returns the
// outcome or ctx's error. Giving up waiting does not cancel the envelope;
// the context given to Send does.
func (r *Receipt) Wait(ctx context.Context) error {
	r.mu.Lock()
	if r.resolved {
		err := r.err
		r.mu.Unlock()
		return err
	}
	r.mu.Unlock()
	select {
	case <-r.Done():
		return r.Err()
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
