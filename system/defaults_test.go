package system_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The documented defaults, measured in a synctest bubble's fake time.

func TestDefaultIdleTimeoutIsOneMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs := systemtest.NewEvents(systemtest.Limit)
		def := probe("default-idle", nil, nil)
		sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe}, def)
		if err := def.Ref(sys, "k").Tell(context.Background(), Note{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if n := evs.Count(systemtest.Is(system.ActivationEnded, "k")); n != 0 {
			t.Fatal("the key idled out before a minute")
		}
		time.Sleep(time.Minute/4 + 100*time.Millisecond) // a sweep period and some linger
		synctest.Wait()
		if n := evs.Count(systemtest.Is(system.ActivationEnded, "k")); n != 1 {
			t.Fatalf("the key did not idle out within a minute and a sweep: %v", evs.Snapshot())
		}
	})
}

func TestDefaultAskTimeoutIsTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		def := actor.Define("default-ask", func(c *actor.Context[int, Msg], m Msg) error {
			<-c.Done()
			return nil
		})
		sys := systemtest.NewSystem(t, system.Config{}, def)
		begin := time.Now()
		_, err := actor.Ask(context.Background(), def.Ref(sys, "k"), Do{})
		mustIs(t, err, context.DeadlineExceeded)
		if took := time.Since(begin); took != 10*time.Second {
			t.Errorf("an ask without deadline gave up after %v, want 10s", took)
		}
	})
}

func TestDefaultBackoffStartsAt100msAndCapsAt10s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &opLog{}
		var start time.Time
		def := stamped("default-backoff", l, &start)
		sys := systemtest.NewSystem(t, system.Config{}, def)
		ref := def.Ref(sys, "k")
		start = time.Now()
		var want []string
		at := time.Duration(0)
		for i := range 9 {
			if err := ref.Tell(context.Background(), Note{Op: "error"}); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("error@%v", at))
			at += min(100*time.Millisecond<<i, 10*time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // past the 10s default
		defer cancel()
		if _, err := actor.Ask(ctx, ref, Do{Op: "get"}); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("get@%v", at))
		if !slices.Equal(l.get(), want) {
			t.Errorf("handled\n%v\nwant\n%v", l.get(), want)
		}
	})
}
