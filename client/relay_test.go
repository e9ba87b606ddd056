package client_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// hostMark is hosted by no system: its refs in one system are equal to
// each other and to no other system's, so they key per-system maps.
var hostMark = actor.Define("host-mark", func(*actor.Context[struct{}, struct{}], struct{}) error { return nil })

// hostID identifies the runtime behind sys.
func hostID(sys actor.System) any { return hostMark.Ref(sys, "h") }

// hostAddr maps each member's runtime to its address, for Where.
var hostAddr sync.Map

type Where struct {
	actor.Reply[Msg, string]
}

func (Where) msg() {}

// Located answers Where with the address of the member that runs the key.
var Located = actor.Define("located", func(c *actor.Context[int, Msg], m Msg) error {
	switch m := m.(type) {
	case Add:
		c.SetState(c.State() + m.N)
	case Get:
		return actor.Respond(c, m, c.State())
	case Where:
		addr, _ := hostAddr.Load(hostID(c.System()))
		s, _ := addr.(string)
		return actor.Respond(c, m, s)
	}
	return nil
}).WithMessages(Add{}, Get{}, Where{})

// TestClientRelaysAroundABrokenLinkToOneMember cuts the client's link to
// one member only: the members still hear each other, so the ring keeps
// that member and its keys. The client must still reach them, through
// another member, with tells and asks, once the link has been silent for
// Config.Silence.
func TestClientRelaysAroundABrokenLinkToOneMember(t *testing.T) {
	ctx := systemtest.Ctx(t)
	fn := faultnet.NewNetwork(1)
	systems := systemtest.StartCluster(t, 3, func(_ int, cfg *system.Config) {
		ln, err := fn.Listen(ctx, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = ln
		cfg.Dialer = fn.Dialer(ln.Addr().String())
	}, Located)
	for _, s := range systems {
		hostAddr.Store(hostID(s), s.Addr())
	}
	reg := prometheus.NewRegistry()
	c, err := client.New(ctx, client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()},
		SyncInterval: 200 * time.Millisecond, Silence: 600 * time.Millisecond, Dialer: fn.Dialer("client"), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	keys := make([]string, 30)
	owner := map[string]string{}
	count := map[string]int{}
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		at, err := actor.Ask(ctx, Located.Ref(c, keys[i]), Where{})
		if err != nil {
			t.Fatal(err)
		}
		owner[keys[i]] = at
		count[at]++
	}
	cut := systems[1].Addr()
	if count[cut] == 0 {
		t.Fatalf("no key of %d on %s: %v", len(keys), cut, count)
	}
	fn.Partition("client", cut, faultnet.Blackhole)
	t.Cleanup(fn.HealAll)

	systemtest.WaitUntil(t, "every key answered by its owner, through a relay for "+cut, func() bool {
		for _, k := range keys {
			actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			at, err := actor.Ask(actx, Located.Ref(c, k), Where{})
			cancel()
			if err != nil || at != owner[k] {
				return false
			}
		}
		return true
	})
	if n := systemtest.GaugeValue(t, reg, "troupe_relay_silent_members"); n != 1 {
		t.Errorf("troupe_relay_silent_members = %v with the link to %s cut, want 1", n, cut)
	}
	relayed := systemtest.CounterValue(t, reg, "troupe_relay_sent_messages_total")
	if relayed < float64(count[cut]) {
		t.Errorf("troupe_relay_sent_messages_total = %v, want at least the %d asks to %s's keys", relayed, count[cut], cut)
	}
	// Tells take the same detour, each delivered once.
	for _, k := range keys {
		if err := Located.Ref(c, k).Tell(ctx, Add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	systemtest.WaitUntil(t, "every key counted one tell", func() bool {
		for _, k := range keys {
			if n, err := actor.Ask(ctx, Located.Ref(c, k), Get{}); err != nil || n != 1 {
				return false
			}
		}
		return true
	})
	if n := systemtest.CounterValue(t, reg, "troupe_relay_sent_messages_total"); n < relayed+float64(count[cut]) {
		t.Errorf("troupe_relay_sent_messages_total = %v after the tells, want at least %v before them and the %d tells to %s's keys", n, relayed, count[cut], cut)
	}
}
