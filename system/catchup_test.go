package system_test

import (
	"context"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

func TestAClusterOfOneWhoseStoreStoppedUncleanlyServesOnceJoined(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority))
	sys := systemtest.Join(t, nil, func(cfg *system.Config) { cfg.DataDir = dir }, def)
	systemtest.WaitAlive(t, []*system.System{sys}, 1)
	eventually(t, "the first add", func(ctx context.Context) (int, error) { return actor.Ask(ctx, def.Ref(sys, "a"), DAdd{N: 1}) })
	crashed := copyDir(t, dir)
	closeNow(t, sys)
	sys = systemtest.Join(t, nil, func(cfg *system.Config) { cfg.DataDir = crashed }, def)
	systemtest.WaitAlive(t, []*system.System{sys}, 1)
	if got := eventually(t, "an add after the unclean stop", func(ctx context.Context) (int, error) {
		return actor.Ask(ctx, def.Ref(sys, "a"), DAdd{N: 1})
	}); got < 1 {
		t.Fatalf("the count after the unclean stop: %d", got)
	}
}
