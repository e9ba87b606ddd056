package system_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// TestActivationAfterAReleaseKeepsItsState races a new activation with
// the goroutine of the one just released: the new activation, and the
// state it saved, must survive until its own idle timeout or release.
func TestActivationAfterAReleaseKeepsItsState(t *testing.T) {
	def := actor.Define("phoenix", func(c *actor.Context[int, Msg], m Msg) error {
		switch opOf(m) {
		case "release":
			c.Release()
			if d, ok := m.(Do); ok {
				return actor.Respond(c, d, "")
			}
		case "add":
			c.Update(func(n int) int { return n + 1 })
		case "get":
			return actor.Respond(c, m.(Do), strconv.Itoa(c.State()))
		}
		return nil
	})
	sys := systemtest.NewSystem(t, system.Config{Linger: 50 * time.Microsecond}, def)
	ctx := systemtest.Ctx(t)
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Go(func() {
			ref := def.Ref(sys, strconv.Itoa(k))
			for i := range 500 {
				if _, err := actor.Ask(ctx, ref, Do{Op: "release"}); err != nil {
					t.Error(err)
					return
				}
				if err := ref.Tell(ctx, Note{Op: "add"}); err != nil {
					t.Error(err)
					return
				}
				got, err := actor.Ask(ctx, ref, Do{Op: "get"})
				if err != nil {
					t.Error(err)
					return
				}
				if got != "1" {
					t.Errorf("key %d round %d: state after release then add = %s, want 1: the new activation was dropped", k, i, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
