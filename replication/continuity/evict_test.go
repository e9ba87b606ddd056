package continuity

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// An evict deletes a record only if it is ended and is the one its
// ledger counted (ended at the evict's time): a submitted record, or a
// later record under the key, stays. The ledger's entries are hints; this
// check is what makes acting on a stale one safe.
func TestAnEvictDeletesOnlyTheEndedRecordItNames(t *testing.T) {
	defs, err := Actors(Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	sys := systemtest.NewSystem(t, system.Config{}, defs...)
	ctx := systemtest.Ctx(t)
	n := Name{Scope: "payments.charge", Key: "evict-me"}
	key, err := n.actorKey()
	if err != nil {
		t.Fatal(err)
	}
	ref := records.Ref(sys, key)
	tk, rec, err := Submit(ctx, sys, n, []byte("r"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Tells and asks from one sender to one key keep their order, so a
	// Get after an evict sees what the evict did.
	if err := ref.Tell(ctx, evict{Ended: rec.Updated}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := Get(ctx, sys, n); err != nil || !ok || got.Phase != Submitted {
		t.Fatalf("a submitted record after an evict: %+v, found %v, %v; want it kept", got, ok, err)
	}
	done, err := Complete(ctx, sys, tk, []byte("ok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Tell(ctx, evict{Ended: done.Updated.Add(-time.Nanosecond)}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := Get(ctx, sys, n); err != nil || !ok || !got.Done() {
		t.Fatalf("an ended record after the evict of an earlier one under its key: %+v, found %v, %v; want it kept", got, ok, err)
	}
	if u, err := UsageOf(ctx, sys, ""); err != nil || u.Records != 1 {
		t.Fatalf("the ledger's usage with one ended record: %+v, %v; want 1 record", u, err)
	}
	if err := ref.Tell(ctx, evict{Ended: done.Updated}); err != nil {
		t.Fatal(err)
	}
	systemtest.WaitUntil(t, "the evicted record to be gone and uncounted", func() bool {
		_, ok, err := Get(ctx, sys, n)
		if err != nil {
			t.Fatal(err)
		}
		u, err := UsageOf(ctx, sys, "")
		if err != nil {
			t.Fatal(err)
		}
		return !ok && u == (Usage{})
	})
}
