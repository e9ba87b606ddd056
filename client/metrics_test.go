package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// newMeteredClient returns a client whose metrics go to a registry of
// its own, closed when the test ends.
func newMeteredClient(t *testing.T, seeds ...string) (*client.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: seeds, SyncInterval: 200 * time.Millisecond, Metrics: reg})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, reg
}

// messages is troupe_messages_total of typ, kind and outcome.
func messages(t *testing.T, reg prometheus.Gatherer, typ, kind, outcome string) float64 {
	t.Helper()
	return systemtest.CounterValue(t, reg, "troupe_messages_total", "type", typ, "kind", kind, "outcome", outcome)
}

func TestClientMetricsCountTellsAndAsksByTypeAndOutcome(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, nil, Counter)
	c, reg := newMeteredClient(t, systems[0].Addr())
	ctx := systemtest.Ctx(t)
	for i := range 3 {
		if _, err := actor.Ask(ctx, Counter.Ref(c, "k"+strconv.Itoa(i)), Get{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if err := Counter.Ref(c, "k"+strconv.Itoa(i)).Tell(ctx, Add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// An ask held by its handler past its deadline.
	id := fmt.Sprintf("%s#%d", t.Name(), holdSeq.Add(1))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := actor.Ask(short, Counter.Ref(c, "held"), Hold{ID: id}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an ask past its deadline: %v, want DeadlineExceeded", err)
	}
	systemtest.Recv(t, releasedCh(id), "the owner's handler to see the ask withdrawn")
	// An empty key is no address: nothing is sent.
	if err := Counter.Ref(c, "").Tell(ctx, Add{N: 1}); err == nil {
		t.Fatal("a tell to an empty key succeeded")
	}

	for _, want := range []struct {
		kind, outcome string
		n             float64
	}{
		{"ask", "ok", 3}, {"ask", "timeout", 1}, {"ask", "failed", 0}, {"ask", "refused", 0}, {"ask", "undelivered", 0},
		{"tell", "sent", 4}, {"tell", "undelivered", 1}, {"tell", "refused", 0}, {"tell", "timeout", 0},
	} {
		if got := messages(t, reg, "counter", want.kind, want.outcome); got != want.n {
			t.Errorf("troupe_messages_total{type=counter,kind=%s,outcome=%s} = %v, want %v", want.kind, want.outcome, got, want.n)
		}
	}
	for _, m := range systemtest.Family(t, reg, "troupe_messages_total").GetMetric() {
		for _, ok := range []string{"ok", "failed"} {
			if systemtest.HasLabels(m, []string{"type", "counter", "kind", "tell", "outcome", ok}) {
				t.Errorf("a client reports tell/%s: it handles no tell (its successes are sent, counted once more where handled)", ok)
			}
		}
	}
	h := systemtest.Sample(t, reg, "troupe_ask_duration_seconds", "type", "counter").GetHistogram()
	if h.GetSampleCount() != 4 {
		t.Errorf("troupe_ask_duration_seconds{type=counter} counts %d asks, want the 4 made", h.GetSampleCount())
	}
	if h.GetSampleSum() < 0.050 {
		t.Errorf("troupe_ask_duration_seconds{type=counter} sums %vs, want at least the 50 ms the timed-out ask waited", h.GetSampleSum())
	}

	for _, want := range []struct {
		name   string
		labels []string
		n      float64
	}{
		{"troupe_ready", nil, 1}, {"troupe_members", []string{"status", "alive"}, 2},
		{"troupe_members", []string{"status", "suspect"}, 0}, {"troupe_members", []string{"status", "joining"}, 0},
		{"troupe_asks_in_flight", nil, 0}, {"troupe_wire_connected_peers", nil, 2}, {"troupe_relay_silent_members", nil, 0},
	} {
		if got := systemtest.GaugeValue(t, reg, want.name, want.labels...); got != want.n {
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.n)
		}
	}
	for _, stream := range []string{"application", "membership"} {
		if n := systemtest.CounterValue(t, reg, "troupe_wire_sent_frames_total", "stream", stream); n == 0 {
			t.Errorf("troupe_wire_sent_frames_total{stream=%s} = 0 after asks and syncs", stream)
		}
		if n := systemtest.CounterValue(t, reg, "troupe_wire_received_bytes_total", "stream", stream); n == 0 {
			t.Errorf("troupe_wire_received_bytes_total{stream=%s} = 0 after replies and member lists", stream)
		}
	}
	if n := systemtest.CounterValue(t, reg, "troupe_relay_sent_messages_total"); n != 0 {
		t.Errorf("troupe_relay_sent_messages_total = %v with every link up, want 0", n)
	}
	if v := systemtest.Family(t, reg, "troupe_build_info").GetMetric()[0].GetLabel(); len(v) != 2 {
		t.Errorf("troupe_build_info labels %v, want version and goversion", v)
	}
	systemtest.Lint(t, reg)
	noKeysOrAddresses(t, reg, []string{"k0", "held", systems[0].Addr(), systems[1].Addr(), id})
}

// noKeysOrAddresses fails the test if a label value in reg holds one of
// the words.
func noKeysOrAddresses(t *testing.T, reg prometheus.Gatherer, words []string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, w := range words {
					if strings.Contains(l.GetValue(), w) {
						t.Errorf("%s{%s=%q} names a key or an address", mf.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}

func TestClientMetricsUseOnlyTheRegistryPassedAndLeaveItOnClose(t *testing.T) {
	systems := systemtest.StartCluster(t, 1, nil, Counter)
	reg := prometheus.NewRegistry()
	c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Ready() {
		t.Error("Ready = false for a client that learned the cluster, want true")
	}
	before := systemtest.Series(t, reg)
	if before == 0 {
		t.Fatal("nothing registered on the registry passed")
	}
	mfs, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "troupe_") {
			t.Errorf("%s on the global default registry", mf.GetName())
		}
	}
	// One client per registry: the second is refused, and leaves nothing.
	if _, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, Metrics: reg}); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("a second client on one registry: %v, want prometheus.AlreadyRegisteredError", err)
	}
	if n := systemtest.Series(t, reg); n != before {
		t.Errorf("%d series after a second client was refused, want the first's %d", n, before)
	}
	c.Close()
	if c.Ready() {
		t.Error("Ready = true after Close, want false")
	}
	if n := systemtest.Series(t, reg); n != 0 {
		t.Errorf("%d series after Close, want none", n)
	}
}

// With metrics on, a client reports as many series with three members
// and 20,000 keys as with one member and no key used: every label comes
// from a fixed set. (The members' test uses 100,000 keys; here each key
// is a remote tell and an activation on a member, half a minute under
// the race detector for 100,000, for no more certainty: no label of the
// client's takes a key.)
func TestClientMetricSeriesStayFixedWithManyKeysAndMembers(t *testing.T) {
	first := systemtest.StartCluster(t, 1, nil, Counter, Located)
	c, reg := newMeteredClient(t, first[0].Addr())
	// A client registers a type's runtime, and its series, with its first
	// ref.
	Counter.Ref(c, "x")
	Located.Ref(c, "x")
	before := systemtest.Series(t, reg)
	systems := first
	for range 2 {
		systems = append(systems, systemtest.Join(t, []string{first[0].Addr()}, nil, Counter, Located))
	}
	// Longer than systemtest.Limit: many tells under the race detector.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// Asks first: behind 100,000 activations they would wait long.
	for i := range 500 {
		if _, err := actor.Ask(ctx, Located.Ref(c, "key-"+strconv.Itoa(i)), Get{}); err != nil {
			t.Fatal(err)
		}
	}
	const keys = 20_000
	for i := range keys {
		if err := Counter.Ref(c, "key-"+strconv.Itoa(i)).Tell(ctx, Add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if after := systemtest.Series(t, reg); after != before {
		t.Errorf("%d series with 1 member and no keys, %d with %d members and %d keys: want the same", before, after, len(systems), keys)
	}
	if got := messages(t, reg, "counter", "tell", "sent"); got != keys {
		t.Errorf("troupe_messages_total{type=counter,kind=tell,outcome=sent} = %v, want %d", got, keys)
	}
	if got := systemtest.GaugeValue(t, reg, "troupe_members", "status", "alive"); got != 3 {
		t.Errorf("troupe_members{status=alive} = %v, want 3", got)
	}
	systemtest.Lint(t, reg)
}
