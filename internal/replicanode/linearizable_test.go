package replicanode

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// The nemesis run lasts nemesisDefault unless TROUPE_REPLICATION_NEMESIS
// names another duration (say 2m for a figures run); its seed is
// TROUPE_REPLICATION_SEED, or the clock's (logged, to replay a failure).
// Nodes keep their copies in memory stores that outlive a crash, as the
// page cache does a kill -9; TROUPE_REPLICATION_BADGER=1 gives each a
// badger store instead.
const nemesisDefault = 3 * time.Second

func nemesisSettings(t *testing.T) (time.Duration, uint64) {
	d := nemesisDefault
	if s := os.Getenv("TROUPE_REPLICATION_NEMESIS"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("TROUPE_REPLICATION_NEMESIS=%q: %v", s, err)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TROUPE_REPLICATION_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TROUPE_REPLICATION_SEED=%q: %v", s, err)
		}
	}
	return d, seed
}

// Five nodes, three replicas per key at Majority, clients reading,
// writing and compare-and-setting a few registers at whichever replica
// they pick (which acquires the key, fencing the previous owner), while a
// seeded nemesis cuts nodes off (a paused process), splits the cluster
// 2|3, crashes and restarts nodes from their stores, and wipes a node's
// store (it restarts joining, receiving the whole ring, sometimes
// restarts again before its catch-up, and catches up from the four
// others before it counts). Every history is linearizable
// per register, and once the network heals every register is readable.
func TestConcurrentClientsUnderANemesisStayLinearizable(t *testing.T) {
	run, seed := nemesisSettings(t)
	t.Logf("nemesis for %v, TROUPE_REPLICATION_SEED=%d", run, seed)
	const nodes, replicas, registers, clients = 5, 3, 6, 8
	c := newCluster(t, nodes, os.Getenv("TROUPE_REPLICATION_BADGER") == "1")
	r := ring.New(c.ids())
	byAddr := map[string]*member{}
	for _, m := range c.members {
		byAddr[m.addr] = m
	}
	// A register's replicas as placed on the first ring; a restarted
	// member keeps its store and its place, under its new incarnation.
	sets := map[string][]*member{}
	var keys []string
	for i := range registers {
		id := fmt.Sprintf("r%d", i)
		keys = append(keys, id)
		for _, n := range r.AppendReplicas(nil, key(id).Token(), replicas) {
			sets[id] = append(sets[id], byAddr[n.Addr])
		}
	}
	h := lincheck.NewHistory[string]()
	var next atomic.Int64
	// One operation per register at a time at each node, as an actor
	// handles one message at a time.
	var locks sync.Map
	lockOf := func(m *member, id string) *sync.Mutex {
		l, _ := locks.LoadOrStore(m.addr+"/"+id, new(sync.Mutex))
		return l.(*sync.Mutex)
	}

	op := func(rng *rand.Rand, m *member, id string, final bool) bool {
		node := c.nodeOf(m)
		if node == nil {
			return false
		}
		l := lockOf(m, id)
		l.Lock()
		defer l.Unlock()
		timeout := 300 * time.Millisecond
		if final {
			timeout = waitFor
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		k := key(id)
		if err := node.Acquire(ctx, k, c.ids(sets[id]...), replication.Majority); err != nil {
			if final {
				t.Logf("final acquire of %s at %s: %v", id, m.addr, err)
			}
			return false
		}
		in := lincheck.Input[string]{Key: id, Op: lincheck.Op(rng.IntN(3))}
		if final {
			in.Op = lincheck.Read
		}
		call := h.Now()
		read := func() (int, error) {
			view, err := node.Read(ctx, k)
			if err != nil {
				return 0, err
			}
			v, _ := strconv.Atoi(string(view[stateSlot].Value))
			return v, nil
		}
		write := func(v int) error {
			return node.Write(ctx, k, stateSlot, []byte(strconv.Itoa(v)))
		}
		// unknown records a write whose outcome is unknown, unless it
		// certainly did not happen (the key was not served here).
		unknown := func(out lincheck.Output, err error) bool {
			if !errors.Is(err, replica.ErrNotServing) {
				out.Unknown = true
				h.Add(in, out, call, lincheck.Pending)
			}
			_ = node.Resign(k)
			return false
		}
		switch in.Op {
		case lincheck.Read:
			v, err := read()
			if err != nil {
				if final {
					t.Logf("final read of %s at %s: %v", id, m.addr, err)
				}
				_ = node.Resign(k)
				return false
			}
			h.Add(in, lincheck.Output{Value: v}, call, h.Now())
		case lincheck.Write:
			in.New = int(next.Add(1))
			if err := write(in.New); err != nil {
				return unknown(lincheck.Output{}, err)
			}
			h.Add(in, lincheck.Output{}, call, h.Now())
		case lincheck.CAS:
			in.New = int(next.Add(1))
			v, err := read()
			if err != nil {
				_ = node.Resign(k)
				return false
			}
			// Half the time expect what was read, so that some succeed.
			in.Old = v
			if rng.IntN(2) == 0 {
				in.Old = int(next.Add(1))
			}
			if v != in.Old {
				h.Add(in, lincheck.Output{OK: false}, call, h.Now())
				return true
			}
			if err := write(in.New); err != nil {
				return unknown(lincheck.Output{OK: true}, err)
			}
			h.Add(in, lincheck.Output{OK: true}, call, h.Now())
		}
		return true
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for cl := range clients {
		rng := rand.New(rand.NewPCG(seed, uint64(cl)+1))
		wg.Go(func() {
			// Each client sticks to a replica per register until an
			// operation there fails, so owners change now and then, not
			// on every operation.
			pick := map[string]*member{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := keys[rng.IntN(len(keys))]
				m := pick[id]
				if m == nil || rng.IntN(20) == 0 {
					m = sets[id][rng.IntN(replicas)]
				}
				if op(rng, m, id, false) {
					pick[id] = m
				} else {
					delete(pick, id)
				}
			}
		})
	}

	// The nemesis: one fault at a time, each for a random while, then
	// healed.
	rng := rand.New(rand.NewPCG(seed, 0))
	healAll := func() {
		for _, a := range c.members {
			for _, b := range c.members {
				if a.addr < b.addr {
					c.net.Heal(a.addr, b.addr)
				}
			}
		}
	}
	deadline := time.Now().Add(run)
	faults := map[string]int{}
	for time.Now().Before(deadline) {
		switch rng.IntN(4) {
		case 0: // a node paused past detection: cut off from the others
			m := c.members[rng.IntN(nodes)]
			c.isolate(m)
			faults["pause"]++
		case 1: // a 2|3 split
			perm := rng.Perm(nodes)
			for _, i := range perm[:2] {
				for _, j := range perm[2:] {
					c.net.Partition(c.members[i].addr, c.members[j].addr)
				}
			}
			faults["split"]++
		case 2: // kill -9 and restart from the store
			m := c.members[rng.IntN(nodes)]
			c.crash(m)
			c.start(m)
			faults["restart"]++
		case 3: // the disk is lost: restart empty and catch up
			m := c.members[rng.IntN(nodes)]
			c.wipe(m)
			if rng.IntN(2) == 0 {
				// Restarted before its catch-up, once it stored what
				// it was sent while receiving: it must still receive.
				time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
				c.crash(m)
				c.start(m)
				faults["wipe-restart"]++
			}
			var others []*member
			for _, o := range c.members {
				if o != m {
					others = append(others, o)
				}
			}
			// Every key's other replicas are among the sources, and
			// each needs both of them: take all four.
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			err := c.nodeOf(m).CatchUp(ctx, ring.Range{}, c.ids(others...), len(others))
			cancel()
			if err != nil {
				t.Fatalf("the wiped %s could not catch up: %v", m.addr, err)
			}
			faults["wipe"]++
		}
		// The nemesis paces faults by the clock: a fault lasts a while
		// whatever the clients do. Nothing waits on it for correctness.
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		healAll()
		time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	healAll()
	// Messages held by the last faults still arrive and may fence the
	// first owner tried: a few attempts, each acquiring anew.
	for _, id := range keys {
		read := false
		for attempt := 0; attempt < 5 && !read; attempt++ {
			read = op(rng, sets[id][attempt%replicas], id, true)
		}
		if !read {
			t.Fatalf("register %s could not be read on a healed network", id)
		}
	}
	ops := h.Ops()
	t.Logf("faults %v, %d operations", faults, len(ops))

	res, info := porcupine.CheckOperationsVerbose(lincheck.Model[string](), ops, time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		if name, err := lincheck.Draw[string](info, "replicanode-history-*.html"); err == nil {
			t.Logf("history drawn in %s", name)
		}
		t.Fatalf("the history is not linearizable (TROUPE_REPLICATION_SEED=%d)", seed)
	default:
		t.Logf("porcupine could not decide within its time limit")
	}
}
