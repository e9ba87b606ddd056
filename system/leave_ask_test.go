package system_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// HoldMsg is the message of holdDef.
type HoldMsg interface{ holdMsg() }

// HRun counts a run and waits for the test's release before it answers
// the count.
type HRun struct{ actor.Reply[HoldMsg, int] }

func (HRun) holdMsg() {}

// holdDef counts its runs in runs and signals each start; a run waits for
// release (not for its context: a leave must not end it).
func holdDef(runs *atomic.Int32, started chan<- struct{}, release <-chan struct{}) *actor.Def[int, HoldMsg] {
	return actor.Define("hold", func(c *actor.Context[int, HoldMsg], m HoldMsg) error {
		n := int(runs.Add(1))
		started <- struct{}{}
		<-release
		return actor.Respond(c, m.(HRun), n)
	}).WithMessages(HRun{})
}

// leaverCluster starts three members hosting def with leave timeout
// leave, and returns the asker, the member that owns key and will leave,
// and key.
func leaverCluster(t *testing.T, def actor.Definition, leave time.Duration) (asker, leaver *system.System, key string) {
	t.Helper()
	systems := systemtest.StartCluster(t, 3, func(_ int, cfg *system.Config) { cfg.LeaveTimeout = leave }, def)
	asker = systems[0]
	for i := 0; ; i++ {
		key = fmt.Sprintf("k%d", i)
		if owner := system.OwnerOf(asker, "hold", key); owner != asker.Addr() {
			leaver, _ = byAddr(t, systems, owner)
			return asker, leaver, key
		}
	}
}

// statusIn returns id's status in s's view ("" if it holds none).
func statusIn(s *system.System, addr string) cluster.Status {
	for _, m := range s.Members() {
		if m.ID.Addr == addr {
			return m.Status
		}
	}
	return 0
}

// An ask running on a member that leaves in order is answered by it and
// runs once: the member does not announce its leave before it answered
// (its askers would place the ask again on the key's new owner).
func TestAnAskRunningOnAMemberThatLeavesInOrderRunsOnce(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}, 4), make(chan struct{})
	def := holdDef(&runs, started, release)
	asker, leaver, key := leaverCluster(t, def, 10*time.Second)
	type outcome struct {
		n   int
		err error
	}
	asked := make(chan outcome, 1)
	go func() {
		n, err := actor.Ask(systemtest.Ctx(t), def.Ref(asker, key), HRun{})
		asked <- outcome{n, err}
	}()
	recvSignal(t, started, "the ask to start on the leaver")
	left := make(chan error, 1)
	go func() { left <- leaver.Close(systemtest.Ctx(t)) }()
	systemtest.Await(t, func() error {
		if st := statusIn(asker, leaver.Addr()); st != cluster.StatusLeaving && st != cluster.StatusLeft {
			return fmt.Errorf("the asker sees the leaver %v", st)
		}
		return nil
	})
	// While the ask runs, the leaver must not be seen left nor the ask
	// run elsewhere. (A bounded look: a leave that did not wait would be
	// seen within milliseconds.)
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if statusIn(asker, leaver.Addr()) == cluster.StatusLeft {
			t.Fatal("the leaver announced its leave while it still ran an ask of another member")
		}
		if len(started) > 0 {
			t.Fatal("the ask ran again elsewhere while it ran on the leaver")
		}
	}
	close(release)
	if got := <-asked; got.err != nil || got.n != 1 {
		t.Fatalf("the ask: %d, %v; want 1, its only run, answered by the leaver", got.n, got.err)
	}
	if err := <-left; err != nil {
		t.Fatalf("the leave: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the ask ran %d times", n)
	}
}

// An ask still running when its owner's leave timeout ends may have run:
// it fails with ErrOutcomeUnknown and never runs again elsewhere.
func TestAnAskAbandonedAtALeaveTimeoutFailsWithOutcomeUnknown(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}, 4), make(chan struct{})
	def := holdDef(&runs, started, release)
	asker, leaver, key := leaverCluster(t, def, time.Second)
	t.Cleanup(func() { close(release) }) // before the members close
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	asked := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, def.Ref(asker, key), HRun{})
		asked <- err
	}()
	recvSignal(t, started, "the ask to start on the leaver")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		leaver.Close(cctx)
	}()
	if err := <-asked; !errors.Is(err, actor.ErrOutcomeUnknown) {
		t.Fatalf("an ask abandoned at its owner's leave timeout: %v, want ErrOutcomeUnknown", err)
	}
	<-closed
	if n := runs.Load(); n != 1 {
		t.Fatalf("the ask ran %d times", n)
	}
}

// recvSignal waits for a signal on ch, failing the test after
// systemtest.Limit.
func recvSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(systemtest.Limit):
		t.Fatalf("waited %v for %s", systemtest.Limit, what)
	}
}
