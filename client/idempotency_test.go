package client_test

import (
	"errors"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// Deposit adds N to a ledger and answers the balance.
type Deposit struct {
	actor.Reply[LedgerMsg, int]
	N int
}

type LedgerMsg interface{ ledgerMsg() }

func (Deposit) ledgerMsg() {}

var Ledger = actor.Define("ledger", func(c *actor.Context[int, LedgerMsg], m LedgerMsg) error {
	d := m.(Deposit)
	c.SetState(c.State() + d.N)
	return actor.Respond(c, d, c.State())
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(Deposit{})

// A client stores no state, but the members it asks do: its keyed asks to
// a replicated definition run once, and one to a definition that keeps no
// state is refused before it leaves.
func TestAClientsKeyedAsksRunOnce(t *testing.T) {
	systems := systemtest.StartCluster(t, 3, nil, Ledger, Counter)
	c := newClient(t, systems[0].Addr())
	ctx := actor.WithIdempotencyKey(systemtest.Ctx(t), "deposit-1")
	for i := range 3 {
		if got, err := actor.Ask(ctx, Ledger.Ref(c, "acct"), Deposit{N: 10}); err != nil || got != 10 {
			t.Fatalf("keyed deposit through a client, try %d: %d, %v; want 10", i+1, got, err)
		}
	}
	if _, err := actor.Ask(ctx, Ledger.Ref(c, "acct"), Deposit{N: 20}); !errors.Is(err, actor.ErrIdempotencyConflict) {
		t.Fatalf("the key reused for another deposit: %v, want ErrIdempotencyConflict", err)
	}
	if _, err := actor.Ask(ctx, Counter.Ref(c, "k"), Get{}); !errors.Is(err, actor.ErrIdempotencyUnsupported) {
		t.Fatalf("a keyed ask to a definition that keeps no state: %v, want ErrIdempotencyUnsupported", err)
	}
}
