package replicastore

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
)

// A running store copied with CopyAfterPowerLoss opens unclean with what
// it held, and the copy takes about the disk space the original does: the
// runs of zeros Badger preallocates stay holes (a plain copy wrote some
// 150 MB of zeros per store and filled a CI machine's disk).
func TestACopyAfterPowerLossKeepsTheRecordsAndTheHoles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	defer b.Close()
	want := rec("a", replica.KindState, 3, "kept")
	if err := b.Put(ctx, want); err != nil {
		t.Fatal(err)
	}
	// The running store's files, copied as CopyAfterPowerLoss copies
	// them (it then opens the copy, and Badger truncates them).
	raw := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := copySparse(filepath.Join(dir, e.Name()), filepath.Join(raw, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	origApparent, origUsed := diskUse(t, dir)
	apparent, used := diskUse(t, raw)
	if apparent != origApparent || apparent < 64<<20 {
		t.Fatalf("the copied files add up to %d bytes, the original's %d; want the same, over 64 MiB (Badger's preallocated log)", apparent, origApparent)
	}
	if used > origUsed+(1<<20) {
		t.Fatalf("the copy allocates %d bytes of disk for %d apparent; the original %d", used, apparent, origUsed)
	}
	to := t.TempDir()
	if err := CopyAfterPowerLoss(dir, to); err != nil {
		t.Fatal(err)
	}
	c := openBadger(t, to, Options{})
	defer c.Close()
	if !c.Unclean() {
		t.Fatal("a store copied while it ran without Sync opens clean; want unclean, as after a power loss")
	}
	if got, ok, err := c.Get(ctx, want.Key, want.Slot()); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("in the copy, Get = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

// diskUse returns the apparent size of dir's regular files and the disk
// space allocated to them.
func diskUse(t *testing.T, dir string) (apparent, used int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		apparent += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			used += st.Blocks * 512
		}
	}
	return apparent, used
}
