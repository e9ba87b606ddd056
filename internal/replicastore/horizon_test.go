package replicastore

import (
	"context"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/ring"
)

// TestAnErasingRecordDeletesItsSlotInOrder shows that a record that
// erases its slot deletes what is stored there, whether it comes in an
// earlier Put or in the same one after the record it erases, and that a
// record stored after it in the same Put stays.
func TestAnErasingRecordDeletesItsSlotInOrder(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		gone := rec("a", replica.KindState, 3, "")
		gone.Tombstone = true
		kept := rec("b", replica.KindState, 4, "again")
		if err := s.Put(ctx, gone, rec("b", replica.KindState, 2, "first")); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, replica.Erasing(gone), replica.Erasing(kept), kept); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.Get(ctx, gone.Key, gone.Slot()); err != nil || ok {
			t.Fatalf("an erased slot holds %v, %v, %v; want nothing", got, ok, err)
		}
		if got, ok, err := s.Get(ctx, kept.Key, kept.Slot()); err != nil || !ok || string(got.Value) != "again" {
			t.Fatalf("a slot stored after its erase holds %v, %v, %v; want %q", got, ok, err, "again")
		}
		var seen []replica.Record
		if err := s.Range(ctx, ring.Range{}, func(r replica.Record) bool { seen = append(seen, r); return true }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 {
			t.Fatalf("a range after the erase saw %v, want %v alone", seen, kept)
		}
	})
}

// TestAFormat5StoreMovesTo6WithItsFirstHorizon shows that a store of
// format 5 opens as it is, stays format 5 while no promise carries a
// horizon, and becomes format 6 in the Put that stores the first one
// (so a binary that would ignore horizons refuses it), keeping it across
// a crash.
func TestAFormat5StoreMovesTo6WithItsFirstHorizon(t *testing.T) {
	ctx := context.Background()
	dir := storeOfFormat(t, 5)
	b := openBadger(t, dir, Options{})
	k := replica.Key{Type: "counter", ID: "a"}
	if err := b.Put(ctx, replica.PromiseRecord(k, replica.Epoch{Term: 4, Node: node}, replica.Horizon{})); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 5 {
		t.Fatalf("a format 5 store without horizons became format %d, want 5 still", v)
	}
	b = openBadger(t, dir, Options{})
	h := replica.Horizon{Epoch: replica.Epoch{Term: 3, Node: node}, Version: 7}
	if err := b.Put(ctx, replica.PromiseRecord(k, replica.Epoch{Term: 4, Node: node}, h)); err != nil {
		t.Fatal(err)
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 6 {
		t.Fatalf("a store that holds a horizon has format %d, want 6", v)
	}
	b = openBadger(t, dir, Options{})
	defer b.Close()
	got, ok, err := b.Get(ctx, k, replica.Slot{Kind: replica.KindPromise})
	if err != nil || !ok {
		t.Fatalf("the promise after a crash: %v, %v", ok, err)
	}
	if e, ok := replica.HorizonOf(got); !ok || e != h {
		t.Fatalf("the promise's horizon after a crash is %v (%v), want %v", e, ok, h)
	}
}
