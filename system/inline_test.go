package system_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// An ask from another member that finds its actor idle runs on the
// owner's wire reader (actor.DeliverRemoteInline). These tests hold such
// a handler and check that the member asking is not held with it.

type (
	IMsg interface{ imsg() }
	// Probe answers whether its handler ran on the transport's reader.
	Probe struct{ actor.Reply[IMsg, bool] }
	// Hold blocks until Free{ID} or the ask's end; it answers how it
	// ended ("freed" or "cancelled") and whether it ran on the reader.
	Hold struct {
		actor.Reply[IMsg, string]
		ID string
	}
	Free struct {
		actor.Reply[IMsg, bool]
		ID string
	}
)

func (Probe) imsg() {}
func (Hold) imsg()  {}
func (Free) imsg()  {}

var holds = struct {
	sync.Mutex
	entered map[string]chan bool // receives whether the hold runs inline
	freed   map[string]chan struct{}
	ended   map[string]chan string // receives how the hold ended
}{entered: map[string]chan bool{}, freed: map[string]chan struct{}{}, ended: map[string]chan string{}}

func holdChans(id string) (entered chan bool, freed chan struct{}, ended chan string) {
	holds.Lock()
	defer holds.Unlock()
	if holds.entered[id] == nil {
		holds.entered[id], holds.freed[id], holds.ended[id] = make(chan bool, 1), make(chan struct{}), make(chan string, 1)
	}
	return holds.entered[id], holds.freed[id], holds.ended[id]
}

var holdN atomic.Int64

// holdID names a hold uniquely, across -count runs too.
func holdID(t *testing.T) string { return t.Name() + "#" + strconv.FormatInt(holdN.Add(1), 10) }

// onReader reports whether the calling handler runs on the transport's reader.
func onReader() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "transport.(*liveConn).deliverInline")
}

var inlineProbe = actor.Define("inlineprobe", func(c *actor.Context[int, IMsg], m IMsg) error {
	switch m := m.(type) {
	case Probe:
		return actor.Respond(c, m, onReader())
	case Hold:
		entered, freed, ended := holdChans(m.ID)
		entered <- onReader()
		how := "freed"
		select {
		case <-freed:
		case <-c.Done():
			how = "cancelled"
		}
		ended <- how
		return actor.Respond(c, m, how)
	case Free:
		_, freed, _ := holdChans(m.ID)
		close(freed)
		return actor.Respond(c, m, true)
	}
	return nil
}).WithMessages(Probe{}, Hold{}, Free{})

// probeKeys returns n keys of inlineprobe that from places on to.
func probeKeys(t *testing.T, from, to *system.System, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n && i < 10000; i++ {
		key := "p" + strconv.Itoa(i)
		if system.OwnerOf(from, "inlineprobe", key) == to.Addr() {
			keys = append(keys, key)
		}
	}
	if len(keys) < n {
		t.Fatal("too few keys placed on the target member")
	}
	return keys
}

// warmInline asks key until an ask runs on the owner's reader; the cell
// is then idle, so the next ask from this member runs there too (the
// reader reads it only after the run).
func warmInline(t *testing.T, ref actor.Ref[IMsg]) {
	t.Helper()
	for range 1000 {
		inline, err := actor.Ask(systemtest.Ctx(t), ref, Probe{})
		if err != nil {
			t.Fatal(err)
		}
		if inline {
			return
		}
	}
	t.Fatal("no ask ran on the owner's reader")
}

// holdResult is how a Hold ask ended, as its asker saw it.
type holdResult struct {
	how string
	err error
}

// holdInline starts Hold asks on ref until one runs on the owner's
// reader, and returns its id, the cancel of its context and where its
// outcome arrives. Whether an ask runs inline depends on timing (on a
// loaded machine the cell's goroutine may still linger after the warm-up
// ask), so a hold that ran elsewhere is cancelled and another one tried.
func holdInline(t *testing.T, ref actor.Ref[IMsg]) (id string, cancel context.CancelFunc, res chan holdResult) {
	t.Helper()
	for range 50 {
		warmInline(t, ref)
		id = holdID(t)
		entered, _, _ := holdChans(id)
		var ctx context.Context
		ctx, cancel = context.WithCancel(systemtest.Ctx(t))
		res = make(chan holdResult, 1)
		go func() {
			how, err := actor.Ask(ctx, ref, Hold{ID: id})
			res <- holdResult{how, err}
		}()
		if systemtest.Recv(t, entered, "the hold to start") {
			return id, cancel, res
		}
		cancel()
		systemtest.Recv(t, res, "the hold that ran off the reader to end")
	}
	t.Fatal("no hold ran on the owner's reader in 50 tries")
	return "", nil, nil
}

// A handler that blocks on the reader holds neither the connection nor
// the stream: the asking member's next ask, to another key, is served,
// and frees it.
func TestAnInlineHandlerThatBlocksDoesNotHoldTheMemberAsking(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, nil, inlineProbe)
	keys := probeKeys(t, systems[0], systems[1], 2)
	held, freer := inlineProbe.Ref(systems[0], keys[0]), inlineProbe.Ref(systems[0], keys[1])
	id, cancel, res := holdInline(t, held)
	defer cancel()
	if _, err := actor.Ask(systemtest.Ctx(t), freer, Free{ID: id}); err != nil {
		t.Fatal(err)
	}
	if r := systemtest.Recv(t, res, "the hold's answer"); r.err != nil || r.how != "freed" {
		t.Fatalf("hold answered %q, %v", r.how, r.err)
	}
}

// The cancel of an ask whose handler blocks on the reader reaches the
// handler.
func TestTheCancelOfAnInlineAskReachesItsHandler(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, nil, inlineProbe)
	ref := inlineProbe.Ref(systems[0], probeKeys(t, systems[0], systems[1], 1)[0])
	id, cancel, res := holdInline(t, ref)
	_, _, ended := holdChans(id)
	cancel()
	if r := systemtest.Recv(t, res, "the ask"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", r.err)
	}
	if how := systemtest.Recv(t, ended, "the handler to end"); how != "cancelled" {
		t.Fatalf("the handler ended %q", how)
	}
	// The key serves again.
	if _, err := actor.Ask(systemtest.Ctx(t), ref, Probe{}); err != nil {
		t.Fatal(err)
	}
}

// Asks served on the reader and tells from the same member keep that
// member's order: every ask sees exactly the tells sent before it.
func TestInlineAsksKeepOrderBehindTells(t *testing.T) {
	systems := startCluster(t, 2)
	ref := ccounter.Ref(systems[0], remoteKey(t, systems[0], systems[1]))
	ctx := systemtest.Ctx(t)
	sent := 0
	for i := range 300 {
		for range i % 4 {
			if err := ref.Tell(ctx, Add{N: 1}); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		got, err := actor.Ask(ctx, ref, Get{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != sent {
			t.Fatalf("ask %d saw %d tells, want %d", i, got.Count, sent)
		}
	}
}
