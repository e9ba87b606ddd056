package runtime

import (
	"context"
	"testing"
	"time"
)

// otherCtx is a context of another package over a package context's.
type otherCtx struct{ context.Context }

func TestWatchableKnowsThePackageContexts(t *testing.T) {
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tctx, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	ccctx, cancel3 := context.WithCancelCause(context.Background())
	defer cancel3(nil)
	for _, c := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"WithCancel", cctx, true},
		{"WithTimeout", tctx, true},
		{"WithCancelCause", ccctx, true},
		{"WithValue on WithTimeout", context.WithValue(context.WithValue(tctx, watchableKey{}, 1), chainKey{}, 2), true},
		{"Background", context.Background(), false},
		{"WithValue on Background", context.WithValue(context.Background(), watchableKey{}, 1), false},
		{"another package's", otherCtx{tctx}, false},
		{"WithValue on another package's", context.WithValue(otherCtx{tctx}, watchableKey{}, 1), false},
		{"WithoutCancel", context.WithoutCancel(tctx), false},
	} {
		if got := watchable(c.ctx); got != c.want {
			t.Errorf("watchable(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
