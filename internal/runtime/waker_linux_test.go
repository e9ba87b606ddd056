//go:build linux

package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitResult runs w.wait on another goroutine and returns its outcome's
// channel.
func waitResult(ctx context.Context, w *waker, done <-chan struct{}, dl time.Time) <-chan error {
	errc := make(chan error, 1)
	go func() { w.arm(ctx, dl); errc <- w.waitArmed(ctx, chanOutcome(done)) }()
	return errc
}

// chanOutcome is an outcome set once its channel is closed.
type chanOutcome <-chan struct{}

func (c chanOutcome) outcomeSet() bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func recvErr(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never returned")
		return nil
	}
}

func TestWakerWakesItsWaiter(t *testing.T) {
	w := getWaker()
	if w == nil {
		t.Skip("no eventfd")
	}
	far := time.Now().Add(time.Hour)
	// The outcome set before the wait: no wait at all.
	done := make(chan struct{})
	close(done)
	w.wake()
	w.arm(context.Background(), far)
	if err := w.waitArmed(context.Background(), chanOutcome(done)); err != nil {
		t.Fatalf("wait after the outcome: %v", err)
	}
	// A wake left from that use (the waiter saw the outcome first) only
	// makes the next waiter look again: it still waits for its own.
	w.wake()
	done = make(chan struct{})
	errc := waitResult(context.Background(), w, done, far)
	select {
	case err := <-errc:
		t.Fatalf("the waiter returned %v before its outcome", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(done)
	w.wake()
	if err := recvErr(t, errc); err != nil {
		t.Fatalf("wait: %v", err)
	}
}

func TestWakerWaitEndsAtTheDeadlineOrTheContext(t *testing.T) {
	w := getWaker()
	if w == nil {
		t.Skip("no eventfd")
	}
	never := make(chan struct{})
	if err := recvErr(t, waitResult(context.Background(), w, never, time.Now().Add(5*time.Millisecond))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past its deadline: %v, want DeadlineExceeded", err)
	}
	// The same waker serves again after a deadline passed.
	ctx, cancel := context.WithCancel(context.Background())
	errc := waitResult(ctx, w, never, time.Now().Add(time.Hour))
	cancel()
	if err := recvErr(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v, want Canceled", err)
	}
	done := make(chan struct{})
	errc = waitResult(context.Background(), w, done, time.Now().Add(time.Hour))
	close(done)
	w.wake()
	if err := recvErr(t, errc); err != nil {
		t.Fatalf("wait after a deadline and a cancel: %v", err)
	}
}

// A context's own deadline ends a wait that has none of the poller's.
func TestWakerWaitEndsAtItsContextsDeadline(t *testing.T) {
	w := getWaker()
	if w == nil {
		t.Skip("no eventfd")
	}
	never := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := recvErr(t, waitResult(ctx, w, never, time.Time{})); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past its context's deadline: %v, want DeadlineExceeded", err)
	}
	// Through a value context, and one of another package.
	vctx, cancel2 := context.WithCancel(context.Background())
	errc := waitResult(context.WithValue(vctx, watchableKey{}, 1), w, never, time.Time{})
	cancel2()
	if err := recvErr(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled value context: %v, want Canceled", err)
	}
	octx, cancel3 := context.WithCancel(context.Background())
	errc = waitResult(otherCtx{octx}, w, never, time.Time{})
	cancel3()
	if err := recvErr(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context of another package: %v, want Canceled", err)
	}
	done := make(chan struct{})
	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	errc = waitResult(ctx, w, done, time.Time{})
	close(done)
	w.wake()
	if err := recvErr(t, errc); err != nil {
		t.Fatalf("wait after its context's deadline: %v", err)
	}
}

// A lone ask's slot sent to another node with a context.WithTimeout
// waits on the waker, armed by sentTo: the reply wakes it, and the
// context's deadline ends it with DeadlineExceeded.
func TestASlotSentWithATimeoutContextWaitsOnTheWaker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s := newSlot[int](ctx)
	s.parks = true
	s.sentTo(ctx, nil)
	if s.w == nil {
		t.Skip("no eventfd")
	}
	if s.done != nil {
		t.Fatal("a slot waiting on the waker made a done channel")
	}
	errc := make(chan error, 1)
	go func() { errc <- s.w.waitArmed(ctx, s) }()
	s.complete(42, nil)
	if err := recvErr(t, errc); err != nil || s.val != 42 {
		t.Fatalf("wait = %v with %d, want nil with 42", err, s.val)
	}
	putWaker(s.w)

	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer dcancel()
	s = newSlot[int](dctx)
	s.parks = true
	s.sentTo(dctx, nil)
	go func() { errc <- s.w.waitArmed(dctx, s) }()
	if err := recvErr(t, errc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the context's deadline: %v, want DeadlineExceeded", err)
	}
	if !s.cancel() {
		t.Fatal("the slot had an outcome after its deadline")
	}
}
