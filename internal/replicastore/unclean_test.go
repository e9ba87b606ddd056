package replicastore

import (
	"context"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/troupe-go/troupe/internal/replica"
)

func openBadger(t *testing.T, dir string, opts Options) *Badger {
	t.Helper()
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A store without Sync stopped without Close may have lost its last
// writes to a power loss: the next Open reports it unclean. A clean
// Close, an empty store, or a run with Sync (every Put fsynced) does not.
func TestAStopWithoutCloseAndWithoutSyncIsUnclean(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		sync    bool
		write   bool
		close   bool
		unclean bool
	}{
		{"crash after writes without Sync", false, true, false, true},
		{"clean close without Sync", false, true, true, false},
		{"crash after writes with Sync", true, true, false, false},
		{"crash of an empty store", false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := openBadger(t, dir, Options{Sync: tc.sync})
			if b.Unclean() {
				t.Fatal("a new store reports an unclean stop")
			}
			if tc.write {
				if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
					t.Fatal(err)
				}
			}
			stop := crash
			if tc.close {
				stop = (*Badger).Close
			}
			if err := stop(b); err != nil {
				t.Fatal(err)
			}
			b = openBadger(t, dir, Options{})
			defer b.Close()
			if b.Unclean() != tc.unclean {
				t.Fatalf("reopened after %s: Unclean() = %v, want %v", tc.name, b.Unclean(), tc.unclean)
			}
		})
	}
}

// The marker is removed at Open: a crash after a clean stop and a
// reopen without Sync is unclean again, and a crash after a reopen with
// Sync of a store whose previous run lost writes still reports them
// (the marker says nothing was lost only while no unsynced run crashed).
func TestTheCleanStopMarkerCoversOneRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{})
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{Sync: true})
	if !b.Unclean() {
		t.Fatal("a crash of a run without Sync after a clean stop was not reported")
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if b.Unclean() {
		t.Fatal("a crash of a run with Sync was reported unclean")
	}
}

// A store of format 2 (no clean-stop marker) is upgraded to format 3 at
// Open and, holding records, opens as unclean: nothing says its last run
// lost nothing.
func TestAFormat2StoreIsUpgradedAndOpensUnclean(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		if err := txn.Set(formatKey, encodeFormat(2)); err != nil {
			return err
		}
		return txn.Delete(cleanKey)
	})
	b = openBadger(t, dir, Options{})
	if !b.Unclean() {
		t.Fatal("a format 2 store with records opened clean")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if got, err := decodeFormat(v); err != nil || got != formatVersion {
			t.Fatalf("after opening, the format record says %d, %v; want %d", got, err, formatVersion)
		}
		return nil
	})
}
