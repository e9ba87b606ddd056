package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAgentsArePinnedToTheirMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if len(o.members) != 3 {
		t.Fatalf("the client found members %v, want 3", o.members)
	}
	// Job i went to member i%3: each agent holds its jobs, under its member.
	for i, addr := range o.members {
		want := []string{fmt.Sprintf("job-%d", i), fmt.Sprintf("job-%d", i+3), fmt.Sprintf("job-%d", i+6)}
		if got := o.reports[addr]; got.Node != addr || !slices.Equal(got.Jobs, want) {
			t.Errorf("the agent of %s reported %+v, want node %s with jobs %v", addr, got, addr, want)
		}
	}
	if !slices.Equal(o.active, []int{1, 1, 1}) {
		t.Errorf("activations per member = %v, want [1 1 1]: each member runs its own agent only", o.active)
	}
	if !errors.Is(o.leftErr, actor.ErrUnavailable) {
		t.Errorf("asking the agent of %s after it left: err = %v, want ErrUnavailable", o.left, o.leftErr)
	}
	for addr, node := range o.after {
		if addr != node || addr == o.left {
			t.Errorf("after the leave, the agent of %s answered as %s", addr, node)
		}
	}
	if len(o.after) != 2 {
		t.Errorf("%d agents answered after the leave, want 2", len(o.after))
	}
}
