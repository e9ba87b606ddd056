package continuity_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/replication/continuity"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/system"
)

// TestALongRunStaysWithinItsBounds runs many rounds of keyed work
// through one member with a store on disk: every record is submitted and
// completed, the ledger evicts the oldest past MaxRecords, and the
// collector erases their tombstones once TombstoneAge passed. At the end
// the store holds the newest MaxRecords ended records and every submitted
// one (none of those is ever dropped), no tombstone, and, for every key
// ever used, its promise: the one thing that grows with the keys (see the
// package doc). TROUPE_LONGRUN_RECORDS sets the number of records (3,000
// by default); the figures go to the test log.
func TestALongRunStaysWithinItsBounds(t *testing.T) {
	const bound, perRound, pendingN = 100, 100, 20
	total := 3000
	if s := os.Getenv("TROUPE_LONGRUN_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < perRound {
			t.Fatalf("TROUPE_LONGRUN_RECORDS=%q: want a number of at least %d", s, perRound)
		}
		total = n / perRound * perRound
	}
	response := make([]byte, 512)
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	ctx := systemtest.Ctx(t)
	sys, err := system.New(system.Config{DataDir: dir, TombstoneAge: 200 * time.Millisecond, Metrics: reg,
		Actors: actors(t, continuity.Bounds{MaxRecords: bound})})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sys.Close(context.Background())
		}
	})
	systems := []*system.System{sys}
	pending := submitOnly(t, ctx, systems, "pending", pendingN)

	start := time.Now()
	var largest int64
	var done []continuity.Name
	for round := range total / perRound {
		// A deadline per round: the test's would end a long run.
		rctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
		done = append(done, run(t, rctx, systems, fmt.Sprintf("r%05d", round), perRound, response)...)
		u, err := continuity.UsageOf(rctx, sys, "")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// Evictions trail the records by the ledger's tells: a round's worth at most.
		if u.Records > bound+perRound {
			t.Fatalf("after %d records the ledger counts %d, bound %d", len(done), u.Records, bound)
		}
		largest = max(largest, diskUsage(t, dir))
	}
	elapsed := time.Since(start)
	ctx = systemtest.Ctx(t)

	// Settled: every record but the newest bound evicted, and each
	// eviction's tombstone collected.
	evicted := float64(total - bound)
	systemtest.Await(t, func() error {
		got := systemtest.CounterValue(t, reg, "troupe_replication_tombstones_collected_total")
		if got != evicted {
			return fmt.Errorf("%.0f tombstones collected, want %.0f", got, evicted)
		}
		return nil
	})
	awaitNewestKept(t, ctx, sys, done[len(done)-bound:], bound)
	checkPending(t, ctx, sys, pending)
	closed = true
	if err := sys.Close(ctx); err != nil {
		t.Fatal(err)
	}
	disk := diskUsage(t, dir)

	c := countStored(t, dir, "troupe.continuity")
	if c.live != bound+pendingN || c.tombstones != 0 {
		t.Errorf("the store holds %d records and %d tombstones; want %d records (the newest ended and the submitted) and no tombstone", c.live, c.tombstones, bound+pendingN)
	}
	if c.promises != total+pendingN || c.horizons != total-bound {
		t.Errorf("the store holds %d promises, %d with a horizon; want one per key ever used (%d), of them one per collected key (%d)", c.promises, c.horizons, total+pendingN, total-bound)
	}
	t.Logf("%d records of %d B through one member in %v (%.0f/s): the store keeps %d records, %d promises (%.0f B each, key included); disk %.1f MiB at most during the run, %.1f MiB at the end",
		total, len(response), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), c.live, c.promises,
		float64(c.promiseBytes)/float64(c.promises), float64(largest)/(1<<20), float64(disk)/(1<<20))
	// What a store takes besides its records: badger's memtable log
	// and tables, whatever the run's length. A store that kept what
	// it was told to erase would grow past it with longer runs.
	const most = 256 << 20
	if largest > most || disk > most {
		t.Errorf("the store took %d bytes on disk during the run, %d at the end; want at most %d", largest, disk, int64(most))
	}
}

// stored counts a type's records in a closed store.
type stored struct {
	live, tombstones, promises, horizons int
	// promiseBytes sums the promises' keys and values.
	promiseBytes int
}

// countStored opens the store in dir and counts typ's records.
func countStored(t *testing.T, dir, typ string) stored {
	t.Helper()
	store, err := replicastore.Open(dir, replicastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var c stored
	err = store.Range(context.Background(), ring.Range{}, func(r replica.Record) bool {
		if r.Key.Type != typ {
			return true
		}
		switch {
		case r.Kind == replica.KindPromise:
			c.promises++
			c.promiseBytes += len(r.Key.Type) + len(r.Key.ID) + len(r.Value) + 24 // the epoch and version
			if _, ok := replica.HorizonOf(r); ok {
				c.horizons++
			}
		case r.Tombstone:
			c.tombstones++
		default:
			c.live++
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// diskUsage returns the bytes the files under dir take on disk (their
// allocated blocks: badger's files are preallocated, sparse).
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile (a compaction)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
