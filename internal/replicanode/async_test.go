package replicanode

import (
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
)

// asyncResult collects the calls of one WriteAsync's done.
type asyncResult struct{ errs chan error }

func newAsyncResult() *asyncResult { return &asyncResult{errs: make(chan error, 2)} }

func (r *asyncResult) done(err error) { r.errs <- err }

// wait returns the first call's error and checks there is no second.
func (r *asyncResult) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.errs:
		select {
		case again := <-r.errs:
			t.Fatalf("done was called twice: %v, then %v", err, again)
		default:
		}
		return err
	case <-time.After(waitFor):
		t.Fatal("done was never called")
		return nil
	}
}

// WriteAsync returns at once and calls done once the write met its
// level; the write is then read like any other.
func TestAnAsyncWriteCallsDoneOnceItMetTheLevel(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	m := c.members[0]
	if err := m.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	results := make([]*asyncResult, 5)
	for i := range results {
		results[i] = newAsyncResult()
		if err := m.node.WriteAsync(k, stateSlot, []byte{byte(i)}, results[i].done); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range results {
		if err := r.wait(t); err != nil {
			t.Fatalf("async write %d: %v", i, err)
		}
	}
	if got, err := readState(ctx, m, k); err != nil || got != string([]byte{4}) {
		t.Fatalf("read %q, %v; want the last async write", got, err)
	}
}

// An async write that cannot meet its level is answered when the node
// closes; one on a key not served fails with ErrNotServing; one refused
// at once returns its error and never calls done.
func TestAnAsyncWriteIsAnsweredWhateverHappens(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	m := c.members[0]
	notServed := newAsyncResult()
	if err := m.node.WriteAsync(k, stateSlot, []byte("x"), notServed.done); err != nil {
		t.Fatal(err)
	}
	if err := notServed.wait(t); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("an async write on a key not served got %v, want ErrNotServing", err)
	}
	if err := m.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	c.isolate(m)
	stuck := newAsyncResult()
	if err := m.node.WriteAsync(k, stateSlot, []byte("x"), stuck.done); err != nil {
		t.Fatal(err)
	}
	if err := m.node.WriteAsync(k, stateSlot, make([]byte, DefaultMaxValue+1), func(error) { t.Error("done called for a refused write") }); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("an oversized async write returned %v, want ErrValueTooLarge", err)
	}
	node := m.node
	c.crash(m)
	if err := stuck.wait(t); !errors.Is(err, ErrClosed) {
		t.Fatalf("an async write waiting when the node closed got %v, want ErrClosed", err)
	}
	if err := node.WriteAsync(k, stateSlot, []byte("x"), func(error) { t.Error("done called on a closed node") }); !errors.Is(err, ErrClosed) {
		t.Fatalf("an async write on a closed node returned %v, want ErrClosed", err)
	}
}
