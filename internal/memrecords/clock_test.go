package memrecords

import (
	"sync"
	"time"
)

// fakeClock moves only when told; Advance runs what falls due, in
// deadline order, before it returns.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := t.done
		t.done = true
		return !was
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	for {
		t := c.popDue()
		if t == nil {
			return
		}
		t.f()
	}
}

func (c *fakeClock) popDue() *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first *fakeTimer
	for _, t := range c.timers {
		if !t.done && !t.at.After(c.now) && (first == nil || t.at.Before(first.at)) {
			first = t
		}
	}
	if first != nil {
		first.done = true
	}
	return first
}
