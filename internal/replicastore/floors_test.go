package replicastore

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

var sampleFloors = []replica.Floor{
	{Range: ring.Range{Start: 10, End: 20}, Epoch: replica.Epoch{Term: 3, Node: node}},
	{Range: ring.Range{Start: math.MaxUint64 - 5, End: 3}, Epoch: replica.Epoch{Term: math.MaxUint64, Node: ring.NodeID{Addr: "x", Incarnation: math.MaxUint64}}},
}

func TestFloorsRoundTrip(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if got, err := s.Floors(ctx); err != nil || got != nil {
			t.Fatalf("a new store has floors %v, %v; want none", got, err)
		}
		if err := s.SetFloors(ctx, sampleFloors); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Floors(ctx); err != nil || !slices.Equal(got, sampleFloors) {
			t.Fatalf("floors %v, %v; want %v", got, err, sampleFloors)
		}
	})
}

// formatOf reads dir's format record.
func formatOf(t *testing.T, dir string) uint32 {
	t.Helper()
	var v uint32
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		b, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v, err = decodeFormat(b)
		return err
	})
	return v
}

// storeOfFormat returns the directory of a closed store that holds the
// record "a" (state "x") and says it is of format v.
func storeOfFormat(t *testing.T, v uint32) string {
	t.Helper()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.Put(context.Background(), rec("a", replica.KindState, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(formatKey, encodeFormat(v)) })
	return dir
}

// A store of format 4 (no floors) is opened as it is and moves to format
// 5 in the write that first records floors, so that a binary that reads
// only format 4, and would ignore the floors, refuses it from then on.
// Floors survive a crash.
func TestAFormat4StoreOpensAndMovesTo5WithItsFirstFloors(t *testing.T) {
	ctx := context.Background()
	dir := storeOfFormat(t, 4)
	b := openBadger(t, dir, Options{})
	if got, ok, err := b.Get(ctx, replica.Key{Type: "counter", ID: "a"}, replica.Slot{Kind: replica.KindState}); err != nil || !ok || string(got.Value) != "x" {
		t.Fatalf("a format 4 store's record read %v, %v, %v", got, ok, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 4 {
		t.Fatalf("opening a format 4 store without floors made it format %d, want 4 still", v)
	}
	b = openBadger(t, dir, Options{})
	if err := b.SetFloors(ctx, sampleFloors); err != nil {
		t.Fatal(err)
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 5 {
		t.Fatalf("a store that recorded floors has format %d, want 5", v)
	}
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if got, err := b.Floors(ctx); err != nil || !slices.Equal(got, sampleFloors) {
		t.Fatalf("after a crash the floors are %v, %v; want %v", got, err, sampleFloors)
	}
}

func TestADamagedFloorsRecordIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.SetFloors(context.Background(), sampleFloors); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		v := encodeFloors(sampleFloors)
		v[len(v)-1] ^= 1
		return txn.Set(floorsKey, v)
	})
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if _, err := b.Floors(context.Background()); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("a damaged floors record gave %v, want ErrCorrupt", err)
	}
}

func FuzzDecodeFloors(f *testing.F) {
	f.Add(encodeFloors(nil))
	f.Add(encodeFloors(sampleFloors))
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		floors, err := decodeFloors(b)
		if err != nil {
			if !errors.Is(err, replication.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := decodeFloors(encodeFloors(floors))
		if err != nil || !slices.Equal(again, floors) {
			t.Fatalf("decoded floors %v do not round-trip: %v, %v", floors, again, err)
		}
	})
}
