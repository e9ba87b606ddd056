package actor_test

import (
	"context"
	"errors"
	"github.com/troupe-go/troupe/internal/systemtest"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// waitLimit bounds every wait in these tests: long enough for a loaded
// CI machine under -race, short enough to fail a hung test quickly.
const waitLimit = 10 * time.Second

// CounterMsg is the sealed message type of the counter used across tests.
type CounterMsg interface{ counterMsg() }

// Add adds N to the counter.
type Add struct{ N int }

// Get asks for the counter's value.
type Get struct{ actor.Reply[CounterMsg, int] }

func (Add) counterMsg() {}
func (Get) counterMsg() {}

func counterHandler(c *actor.Context[int, CounterMsg], m CounterMsg) error {
	switch m := m.(type) {
	case Add:
		c.Update(func(n int) int { return n + m.N })
	case Get:
		return actor.Respond(c, m, c.State())
	}
	return nil
}

var counter = actor.Define("counter", counterHandler)

// newSystem starts a system hosting defs and closes it when the test ends.
func newSystem(t testing.TB, cfg system.Config, defs ...system.Definition) *system.System {
	t.Helper()
	cfg.Actors = append(cfg.Actors, defs...)
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	sys, err := system.New(cfg)
	if err != nil {
		t.Fatalf("system.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := sys.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sys
}

// ctxT returns a context bounded by waitLimit.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch, failing the test after waitLimit.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// events records what the observer sees (see internal/systemtest).
type events = systemtest.Events

func newEvents() *events { return systemtest.NewEvents(waitLimit) }

var is = systemtest.Is

// mustIs fails unless errors.Is(err, target).
func mustIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want one matching %v", err, target)
	}
}

// waitUntil polls cond until it holds, failing the test after waitLimit.
// It is for state with no event to wait on (Stats); it asserts nothing
// about timing.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ProbeMsg is the message type of actors that tests build around a
// closure, to observe and steer the handler.
type ProbeMsg interface{ probeMsg() }

// Do asks the probe to perform Op and answer with a string.
type Do struct {
	actor.Reply[ProbeMsg, string]
	Op string
}

// Note tells the probe something.
type Note struct{ Op string }

func (Do) probeMsg()   {}
func (Note) probeMsg() {}

// opOf returns the Op of a probe message.
func opOf(m ProbeMsg) string {
	switch m := m.(type) {
	case Do:
		return m.Op
	case Note:
		return m.Op
	}
	return ""
}

// gate blocks a handler until the test opens it.
type gate struct {
	entered chan string
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan string, 16), open: make(chan struct{})} }

// pass reports that a handler reached the gate and waits for it to open.
func (g *gate) pass(op string) {
	g.entered <- op
	<-g.open
}

// opLog records, in order, what handlers saw.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) add(op string) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

func (l *opLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ops...)
}
