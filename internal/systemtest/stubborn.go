package systemtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// StubbornMsg is the message type of a Stubborn actor.
type StubbornMsg interface{ stubbornMsg() }

// Hold asks a Stubborn actor to block, ignoring its Context, until the
// test releases it; it then answers "released".
type Hold struct {
	actor.Reply[StubbornMsg, string]
}

// Ping asks a Stubborn actor to answer "pong" at once: it activates the
// key, which then waits idle for the next message.
type Ping struct {
	actor.Reply[StubbornMsg, string]
}

func (Hold) stubbornMsg() {}
func (Ping) stubbornMsg() {}

// Stubborn is an actor whose handler ignores its Context: it blocks on a
// channel that only the test closes. Tests of Ask's deadline use it: an
// ask must return at its deadline even then.
type Stubborn struct {
	Def *actor.Def[int, StubbornMsg]

	entered chan struct{}
	release chan struct{}
	once    sync.Once
	left    atomic.Int32
}

// NewStubborn defines a Stubborn actor named name with opts. Defer its
// Release before the systems hosting it close: Close waits for the
// blocked handler.
func NewStubborn(name string, opts ...actor.Option) *Stubborn {
	s := &Stubborn{entered: make(chan struct{}, 64), release: make(chan struct{})}
	s.Def = actor.Define(name, func(c *actor.Context[int, StubbornMsg], m StubbornMsg) error {
		if p, ok := m.(Ping); ok {
			return actor.Respond(c, p, "pong")
		}
		h, ok := m.(Hold)
		if !ok {
			return nil
		}
		s.entered <- struct{}{}
		<-s.release // not c.Done(): the point is a handler that ignores it
		s.left.Add(1)
		return actor.Respond(c, h, "released")
	}, opts...).WithMessages(Hold{}, Ping{})
	return s
}

// Release unblocks every handler, now and later.
func (s *Stubborn) Release() { s.once.Do(func() { close(s.release) }) }

// AskOverrun bounds how long after its deadline an ask may return in
// ExpectDeadline: far beyond any scheduling delay, far below "waits for
// the handler".
const AskOverrun = 5 * time.Second

// ExpectDeadline runs ask, a Hold asked of s with a deadline of d (the
// context's or the ask timeout's), and fails the test unless it returns
// an error matching context.DeadlineExceeded within d+AskOverrun while
// the handler it reached still blocks.
func (s *Stubborn) ExpectDeadline(t testing.TB, d time.Duration, ask func() error) {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- ask() }()
	var err error
	select {
	case err = <-res:
	case <-time.After(d + AskOverrun):
		t.Fatalf("the ask did not return within %v of its %v deadline: it waits for a handler that ignores its context", AskOverrun, d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ask = %v, want an error matching context.DeadlineExceeded", err)
	}
	Recv(t, s.entered, "the handler to have run")
	if n := s.left.Load(); n != 0 {
		t.Fatalf("%d handlers returned before the test released them", n)
	}
}

// DeadlineCase is one way an ask gets its deadline: a Stubborn defined
// with Opts, asked under Ctx(parent), where parent has no deadline.
type DeadlineCase struct {
	Name string
	Opts []actor.Option
	Ctx  func(parent context.Context) (context.Context, context.CancelFunc)
}

// DeadlineCases are the two ways an ask gets a deadline of d: its
// context's, and the definition's ask timeout under a context without one.
func DeadlineCases(d time.Duration) []DeadlineCase {
	return []DeadlineCase{
		{"context deadline", nil, func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, d)
		}},
		{"ask timeout", []actor.Option{actor.WithAskTimeout(d)}, func(p context.Context) (context.Context, context.CancelFunc) {
			return p, func() {}
		}},
	}
}

// ExpectAskDeadline makes ref's key active and idle (a Ping: the actor an
// inline run would find), then asks it a Hold under tc's deadline d and
// checks with ExpectDeadline that the ask returns at its deadline.
func (s *Stubborn) ExpectAskDeadline(t testing.TB, ref actor.Ref[StubbornMsg], d time.Duration, tc DeadlineCase) {
	t.Helper()
	if _, err := actor.Ask(Ctx(t), ref, Ping{}); err != nil {
		t.Fatal(err)
	}
	s.ExpectDeadline(t, d, func() error {
		ctx, cancel := tc.Ctx(context.Background())
		defer cancel()
		_, err := actor.Ask(ctx, ref, Hold{})
		return err
	})
}
