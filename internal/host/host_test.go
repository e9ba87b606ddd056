package host

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stubKind is a Kind that records the shutdown calls it gets.
type stubKind struct {
	name          string
	stops, aborts int
}

func (k *stubKind) Name() string     { return k.name }
func (k *stubKind) Sweep(time.Time)  {}
func (k *stubKind) Deepest() int     { return 0 }
func (k *stubKind) Activations() int { return 0 }
func (k *stubKind) Stop()            { k.stops++ }
func (k *stubKind) Abort()           { k.aborts++ }
func (k *stubKind) Queued() int      { return 0 }

func TestRegisterRefusesATakenNameAndKeepsTheOrder(t *testing.T) {
	h := New(Settings{})
	defer h.Close(context.Background())
	a, b := &stubKind{name: "a"}, &stubKind{name: "b"}
	if !h.Register(a) || !h.Register(b) {
		t.Fatal("Register refused a new name")
	}
	if h.Register(&stubKind{name: "a"}) {
		t.Error("Register accepted a second kind named a")
	}
	if h.Kind("a") != a || h.Kind("b") != b || h.Kind("c") != nil {
		t.Errorf("Kind lookups: a=%v b=%v c=%v", h.Kind("a"), h.Kind("b"), h.Kind("c"))
	}
	if ks := h.Kinds(); len(ks) != 2 || ks[0] != a || ks[1] != b {
		t.Errorf("Kinds() = %v, want [a b] in registration order", ks)
	}
}

func TestUnknownMakesOneValuePerTypeName(t *testing.T) {
	h := New(Settings{})
	defer h.Close(context.Background())
	made := 0
	mk := func() any { made++; return new(int) }
	x, y, z := h.Unknown("t", mk), h.Unknown("t", mk), h.Unknown("u", mk)
	if x != y || x == z || made != 2 {
		t.Errorf("Unknown: same name shared=%v, other name distinct=%v, made %d values, want 2", x == y, x != z, made)
	}
}

func TestCloseWaitsForRunningWorkAndAbortsWhatOutlivesItsDeadline(t *testing.T) {
	h := New(Settings{})
	k := &stubKind{name: "k"}
	h.Register(k)
	h.Enter() // a handler that never leaves before the deadline
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Close(ctx) }()
	select {
	case <-h.HardStop():
	case <-time.After(10 * time.Second):
		t.Fatal("the hard stop did not come after Close's deadline")
	}
	h.Leave() // the cancelled handler returns
	err := <-done
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want it to wrap context.DeadlineExceeded", err)
	}
	if k.stops != 1 || k.aborts != 1 {
		t.Errorf("kind got %d Stop and %d Abort calls, want 1 and 1", k.stops, k.aborts)
	}
	if !h.Closed() {
		t.Error("Closed() = false after Close")
	}
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
}
