package system_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"go.uber.org/goleak"
)

// TestCloseDuringTrafficLeavesNothingBehind closes systems while senders
// tell, ask and fail actors with timers and bodies: Close returns, every
// ask returns one outcome, sends after Close fail with ErrSystemClosed,
// and no goroutine is left.
func TestCloseDuringTrafficLeavesNothingBehind(t *testing.T) {
	for round := range 12 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		def := actor.Define("busy", func(c *actor.Context[int, Msg], m Msg) error {
			switch opOf(m) {
			case "error":
				return errBroken
			case "panic":
				panic("boom")
			case "timer":
				c.Every("t", time.Millisecond, Note{Op: "tick"})
			case "release":
				c.Release()
			case "slow":
				select {
				case <-c.Done():
				case <-time.After(time.Millisecond):
				}
			}
			if d, ok := m.(Do); ok {
				return actor.Respond(c, d, "ok")
			}
			return nil
		}, actor.WithBackoff(time.Microsecond, 50*time.Microsecond), actor.WithMailbox(64, actor.Wait)).
			WithRun(func(ctx context.Context, self actor.Ref[Msg]) error {
				<-ctx.Done()
				return nil
			})
		sys, err := system.New(system.Config{Actors: []actor.Definition{def}, Linger: 200 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		ops := []string{"", "", "error", "panic", "timer", "release", "slow"}
		var wg sync.WaitGroup
		var closed atomic.Bool
		stop := make(chan struct{})
		for s := range 4 {
			seed := rng.Uint64()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(s)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					ref := def.Ref(sys, strconv.Itoa(r.IntN(3)))
					op := ops[r.IntN(len(ops))]
					wasClosed := closed.Load() // before sending: Close has returned
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(3000))*time.Microsecond)
					var err error
					if r.IntN(2) == 0 {
						err = ref.Tell(ctx, Note{Op: op})
					} else {
						_, err = actor.Ask(ctx, ref, Do{Op: op})
					}
					cancel()
					switch {
					case err == nil:
						if wasClosed {
							t.Errorf("a send started after Close returned succeeded")
						}
					case errors.Is(err, actor.ErrSystemClosed), errors.Is(err, actor.ErrActorFailed),
						errors.Is(err, context.DeadlineExceeded), errors.Is(err, actor.ErrNoReply):
					default:
						t.Errorf("unexpected error %v", err)
					}
					if wasClosed && !errors.Is(err, actor.ErrSystemClosed) {
						t.Errorf("a send started after Close returned got %v, want ErrSystemClosed", err)
					}
				}
			})
		}
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond) // let traffic build up
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3))*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- sys.Close(ctx) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("round %d: Close = %v", round, err)
			}
		case <-time.After(systemtest.Limit):
			t.Fatalf("round %d: Close did not return", round)
		}
		cancel()
		closed.Store(true)
		// Senders see the closed system for a little while, then stop.
		time.Sleep(time.Millisecond)
		close(stop)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	goleak.VerifyNone(t)
}
