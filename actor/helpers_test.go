package actor_test

import (
	"errors"
	"github.com/troupe-go/troupe/internal/systemtest"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// waitLimit bounds every wait in these tests (see internal/systemtest).
const waitLimit = systemtest.Limit

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

// newSystem starts a system hosting defs and closes it when the test ends.
func newSystem(t testing.TB, cfg system.Config, defs ...actor.Definition) *system.System {
	t.Helper()
	if cfg.BackoffMin == 0 { // restarts in tests need not wait 100 ms
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	return systemtest.NewSystem(t, cfg, defs...)
}

var (
	ctxT      = systemtest.Ctx
	waitUntil = systemtest.WaitUntil
)

// recv waits for a value on ch, failing the test after waitLimit.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return systemtest.Recv(t, ch, what)
}
