// Package systemtest holds helpers that the tests of several packages
// share: an observer that records a system's events and waits for them.
package systemtest

import (
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/system"
)

// Events records what a system's observer sees. Pass its Observe method
// as system.Config.Observer.
type Events struct {
	limit  time.Duration
	mu     sync.Mutex
	all    []system.Event
	change chan struct{}
}

// NewEvents returns a recorder whose waits give up after limit.
func NewEvents(limit time.Duration) *Events {
	return &Events{limit: limit, change: make(chan struct{})}
}

// Observe records ev; it is a system.Config.Observer.
func (e *Events) Observe(ev system.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	close(e.change)
	e.change = make(chan struct{})
	e.mu.Unlock()
}

// WaitFor waits until an event matches, and returns it; it fails the
// test after the recorder's limit.
func (e *Events) WaitFor(t testing.TB, what string, match func(system.Event) bool) system.Event {
	t.Helper()
	deadline := time.After(e.limit)
	for {
		e.mu.Lock()
		for _, ev := range e.all {
			if match(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		ch := e.change
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for event: %s; saw %v", what, e.Snapshot())
		}
	}
}

// Count returns how many recorded events match.
func (e *Events) Count(match func(system.Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if match(ev) {
			n++
		}
	}
	return n
}

// Snapshot returns the events recorded so far.
func (e *Events) Snapshot() []system.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]system.Event(nil), e.all...)
}

// Is matches events of kind about key.
func Is(kind system.EventKind, key string) func(system.Event) bool {
	return func(ev system.Event) bool { return ev.Kind == kind && ev.Actor.Key == key }
}
