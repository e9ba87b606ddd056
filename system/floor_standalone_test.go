package system_test

import (
	"context"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/system"
)

// A standalone system opened over a store a cluster member left behind
// finds the floors of that member's hand-offs in it. It has no view to
// wait on for their copiers and no set but its own: its acquisitions
// name them and pass.
func TestAStandaloneSystemServesKeysUnderFloorsItsStoreHolds(t *testing.T) {
	dir := t.TempDir()
	st, err := replicastore.Open(dir, replicastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	copier := ring.NodeID{Addr: "10.0.0.9:7400", Incarnation: 5}
	whole := replica.Floor{Range: ring.Range{}, Epoch: replica.Epoch{Term: 9, Node: copier}}
	if err := st.SetFloors(context.Background(), []replica.Floor{whole}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	def := counterDef("counter", nil, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	for i := 1; i <= 3; i++ {
		add(t, def.Ref(sys, "a"), i)
	}
	if got := get(t, def.Ref(sys, "a")); got != 6 {
		t.Fatalf("a key under an old floor counts %d, want 6", got)
	}
}
