package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

var errTestDeclared = errors.New("test: declared")

// panicWrap is a panic's error that wraps the panic's value, as a typed
// API could make one: its chain then holds whatever the handler panicked
// with.
type panicWrap struct{ v error }

func (p *panicWrap) Error() string { return fmt.Sprintf("panic: %v", p.v) }
func (p *panicWrap) Unwrap() error { return p.v }

// A handler that panics with a declared error fails: a recovered panic
// is never an answer, whatever its error wraps.
func TestARecoveredPanicIsNeverARefusal(t *testing.T) {
	h := host.New(host.Settings{})
	defer h.Close(context.Background())
	def := Define("p", func(c *tctx[int, int], m int) error { panic(errTestDeclared) })
	def.spec.Errors = &codec.Errors{}
	if probs := def.spec.Errors.Register("p", []error{errTestDeclared}); len(probs) > 0 {
		t.Fatal(probs)
	}
	def.spec.Panicked = func(v any, _ []byte) error { return &panicWrap{v.(error)} }
	k := def.Instantiate(h).(*kind[int, int, tctx[int, int]])
	h.Register(k)
	_, err := Ask[int, int](context.Background(), k.ref("k"), 1)
	var fe *FailedError
	if !errors.As(err, &fe) || !fe.Panic {
		t.Fatalf("got %v, want a failure with Panic set", err)
	}
	if n := h.Restarts.Load(); n != 1 {
		t.Errorf("%d restarts, want 1: the panic counted as a refusal", n)
	}
}

// A handler that returns the failure of an ask to an actor that panicked
// fails without panicking itself; a deferred reply failed with it does
// not panic either.
func TestAFailurePassedOnIsNoPanic(t *testing.T) {
	h := host.New(host.Settings{})
	defer h.Close(context.Background())
	inner := Define("inner", func(c *tctx[int, int], m int) error { panic("torn") })
	ik := inner.Instantiate(h).(*kind[int, int, tctx[int, int]])
	h.Register(ik)
	outer := Define("outer", func(c *tctx[int, int], m int) error {
		_, err := Ask[int, int](c.Context, ik.ref("i"), 1)
		if m == 1 {
			return err
		}
		d := Defer[int, int, tctx[int, int], int](c.Context)
		go d.Fail(err)
		return nil
	})
	ok := outer.Instantiate(h).(*kind[int, int, tctx[int, int]])
	h.Register(ok)
	for _, m := range []int{1, 2} {
		_, err := Ask[int, int](context.Background(), ok.ref("o"), m)
		var fe *FailedError
		if !errors.As(err, &fe) || fe.Actor != "outer/o" || fe.Panic {
			t.Fatalf("message %d: got %+v, want outer's failure without Panic", m, fe)
		}
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "torn" {
			t.Errorf("message %d: got %v, want inner's panic still in the chain", m, err)
		}
	}
}

// A reply to an asker in this process meets the message limit of a
// clustered system as one to another node does, answered directly or
// through a Deferred.
func TestRepliesHereMeetTheMessageLimit(t *testing.T) {
	const limit = 100
	h := host.New(host.Settings{MaxMessage: limit})
	defer h.Close(context.Background())
	def := Define("r", func(c *tctx[int, int], m int) error {
		if m < 0 {
			d := Defer[int, int, tctx[int, int], []byte](c.Context)
			go d.Resolve(make([]byte, -m))
			return nil
		}
		Respond(c.Context, make([]byte, m))
		return nil
	})
	k := def.Instantiate(h).(*kind[int, int, tctx[int, int]])
	h.Register(k)
	// A []byte under 256 bytes encodes in its length + 2 (bin 8).
	for _, n := range []int{limit - 2, -(limit - 2)} {
		if got, err := Ask[int, []byte](context.Background(), k.ref("k"), n); err != nil || len(got) != limit-2 {
			t.Errorf("%d: got %d bytes, %v: want the reply at the limit", n, len(got), err)
		}
	}
	for _, n := range []int{limit - 1, -(limit - 1)} {
		if _, err := Ask[int, []byte](context.Background(), k.ref("k"), n); !errors.Is(err, ErrMessageTooLarge) {
			t.Errorf("%d: got %v, want ErrMessageTooLarge one byte over", n, err)
		}
	}
}
