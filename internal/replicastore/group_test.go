package replicastore

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
)

// TestGroupCommitSharesOneWriteAmongWaitingPuts: while one write is in
// progress, the Puts that arrive wait and are then written together, in
// one transaction (one fsync with Sync).
func TestGroupCommitSharesOneWriteAmongWaitingPuts(t *testing.T) {
	var g groupCommit
	var mu sync.Mutex
	var batches [][]replica.Record
	entered, release := make(chan struct{}), make(chan struct{})
	write := func(recs []replica.Record) error {
		mu.Lock()
		batches = append(batches, recs)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.commit([]replica.Record{rec("first", replica.KindState, 1, "")}, write); err != nil {
			t.Error(err)
		}
	})
	<-entered
	const waiting = 5
	for i := range waiting {
		wg.Go(func() {
			if err := g.commit([]replica.Record{rec(fmt.Sprint(i), replica.KindState, 1, "")}, write); err != nil {
				t.Error(err)
			}
		})
	}
	// The leader is blocked in its write; wait until every other Put has
	// queued behind it.
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == waiting {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if len(batches) != 2 || len(batches[1]) != waiting {
		sizes := make([]int, len(batches))
		for i, b := range batches {
			sizes[i] = len(b)
		}
		t.Fatalf("batches of sizes %v, want [1 %d]: the waiting Puts should share one write", sizes, waiting)
	}
}

// TestGroupCommitFailsEveryWaitingPutWhenTheWriteFails: a batch's Puts
// share its transaction, so when it fails every one of them must get the
// error; acknowledging any would let the driver send what is not stored.
func TestGroupCommitFailsEveryWaitingPutWhenTheWriteFails(t *testing.T) {
	var g groupCommit
	failure := errors.New("disk full")
	var mu sync.Mutex
	calls := 0
	entered, release := make(chan struct{}), make(chan struct{})
	write := func(recs []replica.Record) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
			return nil
		}
		return failure
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.commit([]replica.Record{rec("first", replica.KindState, 1, "")}, write); err != nil {
			t.Error(err)
		}
	})
	<-entered
	const waiting = 5
	errs := make([]error, waiting)
	for i := range waiting {
		wg.Go(func() {
			errs[i] = g.commit([]replica.Record{rec(fmt.Sprint(i), replica.KindState, 1, "")}, write)
		})
	}
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == waiting {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, failure) {
			t.Errorf("waiting Put %d returned %v, want the batch's error %v", i, err, failure)
		}
	}
}
