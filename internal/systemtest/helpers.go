package systemtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// Limit bounds every wait in the tests that use this package: long enough
// for a loaded machine, short enough that a hang fails the run.
const Limit = 10 * time.Second

// NewSystem starts a system hosting cfg.Actors and defs and closes it when
// the test ends, failing the test if Close does.
func NewSystem(t testing.TB, cfg system.Config, defs ...actor.Definition) *system.System {
	t.Helper()
	cfg.Actors = append(cfg.Actors, defs...)
	sys, err := system.New(cfg)
	if err != nil {
		t.Fatalf("system.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Limit)
		defer cancel()
		if err := sys.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sys
}

// Ctx returns a context bounded by Limit, cancelled when the test ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Limit)
	t.Cleanup(cancel)
	return ctx
}

// Recv waits for a value on ch, failing the test after Limit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Limit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// WaitUntil polls cond until it holds, for state with no event to wait on
// (Stats), failing the test after Limit.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Await(t, func() error {
		if !cond() {
			return fmt.Errorf("timed out waiting until %s", what)
		}
		return nil
	})
}

// Await polls check until it returns nil, for state with no event to wait
// on, failing the test after Limit with check's last error.
func Await(t testing.TB, check func() error) {
	t.Helper()
	deadline := time.Now().Add(Limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", Limit, err)
		}
		time.Sleep(time.Millisecond)
	}
}
