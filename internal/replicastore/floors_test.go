package replicastore

import (
	"context"
	"errors"
	"math"
	"reflect"
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

// departedFloors are floors that name earlier copiers and departures,
// which need format 7.
var departedFloors = []replica.Floor{
	{Range: ring.Range{Start: 10, End: 20}, Epoch: replica.Epoch{Term: 3, Node: node}, Departed: []ring.NodeID{{Addr: "c", Incarnation: 2}, {Addr: "", Incarnation: math.MaxUint64}}},
	{Range: ring.Range{Start: 30, End: 40}, Epoch: replica.Epoch{Term: 4, Node: node}},
	{Range: ring.Range{Start: 50, End: 60}, Epoch: replica.Epoch{Term: 5, Node: node}, Copiers: []ring.NodeID{{Addr: "x1", Incarnation: 3}}},
	{Range: ring.Range{Start: 70, End: 80}, Epoch: replica.Epoch{Term: 6, Node: node}, Copiers: []ring.NodeID{{Addr: "x1", Incarnation: 3}}, Departed: []ring.NodeID{{Addr: "c", Incarnation: 2}}},
}

func TestFloorsRoundTrip(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if got, err := s.Floors(ctx); err != nil || got != nil {
			t.Fatalf("a new store has floors %v, %v; want none", got, err)
		}
		for _, want := range [][]replica.Floor{sampleFloors, departedFloors} {
			if err := s.SetFloors(ctx, want); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Floors(ctx); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("floors %v, %v; want %v", got, err, want)
			}
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
	if got, err := b.Floors(ctx); err != nil || !reflect.DeepEqual(got, sampleFloors) {
		t.Fatalf("after a crash the floors are %v, %v; want %v", got, err, sampleFloors)
	}
}

// A store of format 6 keeps its format while its floors name no
// departure, and moves to format 7, its floors record in version 7's
// layout, in the write that first records one, so that a binary that would
// misread the record refuses the store from then on.
func TestAFormat6StoreMovesTo7WithItsFirstFloorNamingADeparture(t *testing.T) {
	ctx := context.Background()
	dir := storeOfFormat(t, 6)
	b := openBadger(t, dir, Options{})
	if err := b.SetFloors(ctx, sampleFloors); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 6 {
		t.Fatalf("floors without departures made a format 6 store format %d, want 6 still", v)
	}
	b = openBadger(t, dir, Options{})
	if got, err := b.Floors(ctx); err != nil || !reflect.DeepEqual(got, sampleFloors) {
		t.Fatalf("a format 6 store's floors read %v, %v; want %v", got, err, sampleFloors)
	}
	if err := b.SetFloors(ctx, departedFloors); err != nil {
		t.Fatal(err)
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	if v := formatOf(t, dir); v != 7 {
		t.Fatalf("a store that recorded a departure has format %d, want 7", v)
	}
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if got, err := b.Floors(ctx); err != nil || !reflect.DeepEqual(got, departedFloors) {
		t.Fatalf("after a crash the floors are %v, %v; want %v", got, err, departedFloors)
	}
	// Later floors without departures keep format 7's layout.
	if err := b.SetFloors(ctx, sampleFloors); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Floors(ctx); err != nil || !reflect.DeepEqual(got, sampleFloors) {
		t.Fatalf("format 7's floors without departures read %v, %v; want %v", got, err, sampleFloors)
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
		v := encodeFloors(sampleFloors, formatVersion)
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
	f.Add(encodeFloors(nil, floorsFormat), false)
	f.Add(encodeFloors(sampleFloors, floorsFormat), false)
	f.Add(encodeFloors(departedFloors, departedFormat), true)
	f.Add([]byte{0, 0, 0, 0, 1}, true)
	f.Fuzz(func(t *testing.T, b []byte, departed bool) {
		v := floorsFormat
		if departed {
			v = departedFormat
		}
		floors, err := decodeFloors(b, v)
		if err != nil {
			if !errors.Is(err, replication.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := decodeFloors(encodeFloors(floors, v), v)
		if err != nil || !reflect.DeepEqual(again, floors) {
			t.Fatalf("decoded floors %v do not round-trip: %v, %v", floors, again, err)
		}
	})
}
