package system_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/replicastore"
)

// Msg is the message type of the test actors, which tests build around
// closures to observe and steer the handler.
type Msg interface{ msg() }

// Do asks the actor to perform Op; the reply is a string.
type Do struct {
	actor.Reply[Msg, string]
	Op string
}

// Note tells the actor to perform Op.
type Note struct {
	Op     string
	Sender int
	Seq    int
}

func (Do) msg()   {}
func (Note) msg() {}

func opOf(m Msg) string {
	switch m := m.(type) {
	case Do:
		return m.Op
	case Note:
		return m.Op
	}
	return ""
}

var errBroken = errors.New("broken on purpose")

func mustIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want one matching %v", err, target)
	}
}

// gate blocks handlers until the test opens it.
type gate struct {
	entered chan string
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan string, 64), open: make(chan struct{})} }

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

// probe defines an actor that logs every op into l, counts its state up
// by one per message, blocks at g on "block", fails on "error" and
// "panic", and answers Do with "<op> <state>".
func probe(name string, g *gate, l *opLog, opts ...actor.Option) *actor.Def[int, Msg] {
	return actor.Define(name, func(c *actor.Context[int, Msg], m Msg) error {
		op := opOf(m)
		if l != nil {
			l.add(c.Key() + ":" + op)
		}
		switch op {
		case "block":
			g.pass(op)
		case "error":
			return errBroken
		case "panic":
			panic("boom")
		}
		c.Update(func(n int) int { return n + 1 })
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, op+" "+strconv.Itoa(c.State()))
		}
		return nil
	}, opts...)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// copyDir copies a store's directory while its process runs: what a
// power loss would leave, at best, of a store without Sync.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	if err := replicastore.CopyAfterPowerLoss(dir, to); err != nil {
		t.Fatal(err)
	}
	return to
}
