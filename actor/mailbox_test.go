package actor_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// longMailbox queues n notes, numbered from 0, behind a handler held at
// a gate, so that they wait in one long mailbox (longer than a mailbox
// segment), then lets the handler go and waits until it handled them;
// it does so rounds times, numbering on. fail says which numbers the
// handler fails on, and how.
func longMailbox(t *testing.T, n, rounds int, fail map[int]string) []string {
	t.Helper()
	var g *gate
	var log opLog
	def := actor.Define("long", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		op := opOf(m)
		switch op {
		case "hold":
			g.pass(op)
			return nil
		case "sync":
			return actor.Respond(c, m.(Do), "")
		}
		i, err := strconv.Atoi(op)
		if err != nil {
			return err
		}
		switch fail[i] {
		case "error":
			return errBroken
		case "panic":
			panic("broken " + op)
		}
		log.add(op)
		return nil
	}, actor.WithMailbox(1<<20, actor.Wait))
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	for r := range rounds {
		g = newGate()
		if err := ref.Tell(ctx, Note{Op: "hold"}); err != nil {
			t.Fatal(err)
		}
		recv(t, g.entered, "hold")
		for i := r * n; i < (r+1)*n; i++ {
			if err := ref.Tell(ctx, Note{Op: strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
		close(g.open)
		if _, err := actor.Ask(ctx, ref, Do{Op: "sync"}); err != nil {
			t.Fatal(err)
		}
	}
	return log.get()
}

func numbers(n int, skip map[int]string) []string {
	var want []string
	for i := range n {
		if skip[i] == "" {
			want = append(want, strconv.Itoa(i))
		}
	}
	return want
}

func TestLongMailboxIsHandledInOrder(t *testing.T) {
	const n = 5000
	if got, want := longMailbox(t, n, 1, nil), numbers(n, nil); !slices.Equal(got, want) {
		t.Fatalf("handled %d notes, want %d in order; first difference %s", len(got), len(want), firstDiff(got, want))
	}
}

// A failure in the middle of a long mailbox keeps what follows it, in
// order, across the restart: the failed message is the only one lost.
func TestLongMailboxKeepsItsOrderAcrossFailures(t *testing.T) {
	const n = 5000
	fail := map[int]string{3: "error", 1500: "error", 1501: "panic", 3100: "panic", n - 1: "error"}
	if got, want := longMailbox(t, n, 1, fail), numbers(n, fail); !slices.Equal(got, want) {
		t.Fatalf("handled %d notes, want %d in order; first difference %s", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %s, want %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("at %d (lengths %d, %d)", min(len(got), len(want)), len(got), len(want))
}

// Segments emptied by one long mailbox are reused by the next (the
// kind's pool): nothing of the first round may show up again.
func TestReusedSegmentsCarryNothingOver(t *testing.T) {
	const n, rounds = 5000, 3
	if got, want := longMailbox(t, n, rounds, nil), numbers(n*rounds, nil); !slices.Equal(got, want) {
		t.Fatalf("handled %d notes, want %d in order; first difference %s", len(got), len(want), firstDiff(got, want))
	}
}
