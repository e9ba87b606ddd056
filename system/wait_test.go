package system_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

func TestWaitAliveReturnsOnceEveryMemberIsAlive(t *testing.T) {
	first := systemtest.Join(t, nil, nil, ccounter)
	second := systemtest.Join(t, []string{first.Addr()}, nil, ccounter)
	for _, s := range []*system.System{first, second} {
		ms, err := s.WaitAlive(systemtest.Ctx(t), 2)
		if err != nil {
			t.Fatalf("%s: WaitAlive(2): %v", s.Addr(), err)
		}
		for _, m := range ms {
			if m.Status != cluster.StatusAlive {
				t.Fatalf("%s: WaitAlive(2) returned %v, want both members alive", s.Addr(), ms)
			}
		}
		if len(ms) != 2 {
			t.Fatalf("%s: WaitAlive(2) returned %v, want 2 members", s.Addr(), ms)
		}
	}
}

func TestWaitAliveEndsWithCtxAndSaysWhatItSaw(t *testing.T) {
	s := systemtest.Join(t, nil, nil, ccounter)
	ctx, cancel := context.WithTimeout(systemtest.Ctx(t), 50*time.Millisecond)
	defer cancel()
	_, err := s.WaitAlive(ctx, 3)
	var we *cluster.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *WaitError matching DeadlineExceeded", err)
	}
	if we.Alive != 3 || len(we.Seen) != 1 || we.Seen[0].ID.Addr != s.Addr() {
		t.Fatalf("WaitError = %+v, want 3 wanted and the lone member seen", we)
	}
	if !strings.Contains(err.Error(), s.Addr()) {
		t.Fatalf("error %q does not name the member it saw", err)
	}
}

func TestWaitAliveOnAnEmbeddedSystemWaitsOnlyForNone(t *testing.T) {
	s := systemtest.NewSystem(t, system.Config{}, ccounter)
	if _, err := s.WaitAlive(systemtest.Ctx(t), 0); err != nil {
		t.Fatalf("WaitAlive(0): %v", err)
	}
	ctx, cancel := context.WithCancel(systemtest.Ctx(t))
	cancel()
	if _, err := s.WaitAlive(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitAlive(1) with a cancelled ctx: err = %v, want Canceled", err)
	}
}

func TestWaitAliveAfterADeathReturnsOnceTheDeadIsNoLongerSuspect(t *testing.T) {
	var victim systemtest.Net
	systems := startClusterCrashable(t, 3, 2, &victim)
	dead := systems[2].Addr()
	systemtest.Crash(systems[2], &victim)
	ms, err := systems[0].WaitAlive(systemtest.Ctx(t), 2)
	if err != nil {
		t.Fatalf("WaitAlive(2) after a crash: %v", err)
	}
	for _, m := range ms {
		if m.ID.Addr == dead && (m.Status == cluster.StatusAlive || m.Status == cluster.StatusSuspect) {
			t.Fatalf("WaitAlive(2) returned %v: the crashed member is still %v", ms, m.Status)
		}
	}
}
