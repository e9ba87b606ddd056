package continuity_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/replication/continuity"
	"github.com/troupe-go/troupe/system"
)

func named(prefix string, i int) continuity.Name {
	return continuity.Name{Scope: "payments.charge", Tenant: "acme", Key: fmt.Sprintf("%s-%04d", prefix, i)}
}

// run submits and completes n records named prefix-0000 on, one after the
// other, each through the next of systems, with response.
func run(t *testing.T, ctx context.Context, systems []*system.System, prefix string, n int, response []byte) []continuity.Name {
	t.Helper()
	var names []continuity.Name
	for i := range n {
		sys := systems[i%len(systems)]
		name := named(prefix, i)
		tk, _, err := continuity.Submit(ctx, sys, name, []byte("r"), continuity.Options{})
		if err != nil {
			t.Fatalf("submit %s: %v", name.Key, err)
		}
		if _, err := continuity.Complete(ctx, sys, tk, response); err != nil {
			t.Fatalf("complete %s: %v", name.Key, err)
		}
		names = append(names, name)
	}
	return names
}

// submitOnly submits n records named prefix-0000 on and leaves them
// submitted.
func submitOnly(t *testing.T, ctx context.Context, systems []*system.System, prefix string, n int) []continuity.Name {
	t.Helper()
	var names []continuity.Name
	for i := range n {
		name := named(prefix, i)
		if _, _, err := continuity.Submit(ctx, systems[i%len(systems)], name, []byte("r"), continuity.Options{}); err != nil {
			t.Fatalf("submit %s: %v", name.Key, err)
		}
		names = append(names, name)
	}
	return names
}

// ended returns the names among names whose record Get finds ended.
func ended(ctx context.Context, sys *system.System, names []continuity.Name) ([]continuity.Name, error) {
	var out []continuity.Name
	for _, n := range names {
		rec, ok, err := continuity.Get(ctx, sys, n)
		if err != nil {
			return nil, err
		}
		if ok && rec.Done() {
			out = append(out, n)
		}
	}
	return out, nil
}

// checkPending fails the test unless every one of names is found
// submitted.
func checkPending(t *testing.T, ctx context.Context, sys *system.System, names []continuity.Name) {
	t.Helper()
	for _, n := range names {
		rec, ok, err := continuity.Get(ctx, sys, n)
		if err != nil || !ok || rec.Phase != continuity.Submitted {
			t.Fatalf("submitted record %s after the bound was passed: %+v, found %v, %v; want it kept, submitted", n.Key, rec, ok, err)
		}
	}
}

func keysOf(names []continuity.Name) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, n.Key)
	}
	return out
}

// A member that ended more records than MaxRecords keeps the newest
// MaxRecords once its evictions are handled, the oldest evicted first;
// submitted records, more of them than the bound, are not counted and
// none is evicted.
func TestAMemberKeepsItsNewestEndedRecordsWithinMaxRecords(t *testing.T) {
	const bound = 20
	sys := standaloneWithin(t, continuity.Bounds{MaxRecords: bound})
	ctx := systemtest.Ctx(t)
	systems := []*system.System{sys}
	pending := submitOnly(t, ctx, systems, "pending", 2*bound)
	done := run(t, ctx, systems, "done", 3*bound, []byte("ok"))
	awaitNewestKept(t, ctx, sys, done, bound)
	if u, err := continuity.UsageOf(ctx, sys, ""); err != nil || u.Records != bound {
		t.Fatalf("the ledger's usage: %+v, %v; want %d records", u, err, bound)
	}
	checkPending(t, ctx, sys, pending)
}

// awaitNewestKept waits until, of the ended records done (oldest first),
// sys keeps the newest bound and no other.
func awaitNewestKept(t *testing.T, ctx context.Context, sys *system.System, done []continuity.Name, bound int) {
	t.Helper()
	want := keysOf(done[len(done)-bound:])
	systemtest.Await(t, func() error {
		kept, err := ended(ctx, sys, done)
		if err != nil {
			return err
		}
		if got := keysOf(kept); !slices.Equal(got, want) {
			return fmt.Errorf("ended records kept: %v; want the newest %d: %v", got, bound, want)
		}
		return nil
	})
}

// A member whose ended records pass MaxBytes keeps the newest that fit,
// counted by their responses and an overhead each, the oldest evicted
// first.
func TestAMemberKeepsItsNewestEndedRecordsWithinMaxBytes(t *testing.T) {
	const maxBytes = 10_000
	response := bytes.Repeat([]byte("x"), 1000)
	sys := standaloneWithin(t, continuity.Bounds{MaxBytes: maxBytes})
	ctx := systemtest.Ctx(t)
	systems := []*system.System{sys}
	pending := submitOnly(t, ctx, systems, "pending", 5)
	done := run(t, ctx, systems, "done", 40, response)
	// Each record takes its response, key and request id plus
	// RecordOverhead: at most 7 of them fit in 10,000 bytes.
	per := continuity.RecordOverhead + len(response)
	most := maxBytes / per
	systemtest.Await(t, func() error {
		kept, err := ended(ctx, sys, done)
		if err != nil {
			return err
		}
		u, err := continuity.UsageOf(ctx, sys, "")
		if err != nil {
			return err
		}
		got, newest := keysOf(kept), keysOf(done[len(done)-len(kept):])
		switch {
		case u.Bytes > maxBytes:
			return fmt.Errorf("the ledger counts %d bytes, over its bound of %d", u.Bytes, maxBytes)
		case len(kept) == 0 || len(kept) > most || len(kept) != u.Records:
			return fmt.Errorf("%d ended records kept, the ledger counts %d; want from 1 to %d, as many as counted", len(kept), u.Records, most)
		case !slices.Equal(got, newest):
			return fmt.Errorf("ended records kept: %v; want the newest: %v", got, newest)
		}
		return nil
	})
	checkPending(t, ctx, sys, pending)
}

// In a cluster each member bounds the records it owns: once evictions are
// handled, no member's ledger counts more than MaxRecords, every ended
// record left is counted by one of them, the newest are kept, and no
// submitted record is evicted.
func TestEachMemberOfAClusterKeepsItsEndedRecordsWithinItsBounds(t *testing.T) {
	const bound, members = 10, 3
	systems := systemtest.StartCluster(t, members, nil, actors(t, continuity.Bounds{MaxRecords: bound})...)
	ctx := systemtest.Ctx(t)
	pending := submitOnly(t, ctx, systems, "pending", 3*bound)
	done := run(t, ctx, systems, "done", 10*bound, []byte("ok"))
	newest := done[len(done)-bound:]
	systemtest.Await(t, func() error {
		kept, err := ended(ctx, systems[0], done)
		if err != nil {
			return err
		}
		counted := 0
		for _, s := range systems {
			u, err := continuity.UsageOf(ctx, systems[0], s.Addr())
			if err != nil {
				return err
			}
			if u.Records > bound {
				return fmt.Errorf("member %s's ledger counts %d records, over its bound of %d", s.Addr(), u.Records, bound)
			}
			// In a cluster a record's bytes count at its three copies.
			if least := int64(3 * u.Records * continuity.RecordOverhead); u.Bytes < least || u.Bytes%3 != 0 {
				return fmt.Errorf("member %s's ledger counts %d bytes for %d records; want a multiple of 3, at least %d", s.Addr(), u.Bytes, u.Records, least)
			}
			counted += u.Records
		}
		if len(kept) != counted || len(kept) > members*bound {
			return fmt.Errorf("%d ended records kept, the ledgers count %d; want as many, at most %d", len(kept), counted, members*bound)
		}
		for _, n := range newest {
			if !slices.Contains(kept, n) {
				return fmt.Errorf("the newest record %s was evicted; kept %v", n.Key, keysOf(kept))
			}
		}
		return nil
	})
	checkPending(t, ctx, systems[1], pending)
}

func TestBoundsRefuseValuesThatCannotBeMet(t *testing.T) {
	for _, c := range []struct {
		b     continuity.Bounds
		field string
	}{{continuity.Bounds{MaxRecords: -1}, "MaxRecords"}, {continuity.Bounds{MaxBytes: -1}, "MaxBytes"},
		// Less than one record's overhead: every record would go as it ended.
		{continuity.Bounds{MaxBytes: 3*continuity.RecordOverhead - 1}, "MaxBytes"}} {
		if _, err := continuity.Actors(c.b); !errors.Is(err, continuity.ErrInvalidBounds) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Actors(%+v) = %v; want ErrInvalidBounds naming %s", c.b, err, c.field)
		}
	}
	if err := (continuity.Bounds{MaxBytes: 3 * continuity.RecordOverhead}).Validate(); err != nil {
		t.Errorf("Bounds of one record's overhead: %v", err)
	}
	if err := (continuity.Bounds{}).Validate(); err != nil {
		t.Errorf("the zero Bounds (the defaults): %v", err)
	}
}

// A ledger lives in memory: after a restart a member counts the ended
// records it holds as they are used again, at their first end, and
// evicts the oldest of them past its bounds.
func TestARestartedMemberCountsItsEndedRecordsAsTheyAreUsed(t *testing.T) {
	const bound = 10
	dir := t.TempDir()
	ctx := systemtest.Ctx(t)
	first, err := system.New(system.Config{DataDir: dir, Actors: actors(t, continuity.Bounds{})})
	if err != nil {
		t.Fatal(err)
	}
	done := run(t, ctx, []*system.System{first}, "done", 3*bound, []byte("ok"))
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sys := systemtest.NewSystem(t, system.Config{DataDir: dir}, actors(t, continuity.Bounds{MaxRecords: bound})...)
	if u, err := continuity.UsageOf(ctx, sys, ""); err != nil || u.Records != 0 {
		t.Fatalf("the restarted member's ledger before any record is used: %+v, %v; want none counted", u, err)
	}
	awaitNewestKept(t, ctx, sys, done, bound)
}
