package system_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The metric helpers the tests of systems and clients share.
var (
	family       = systemtest.Family
	sample       = systemtest.Sample
	hasLabels    = systemtest.HasLabels
	counterValue = systemtest.CounterValue
	gaugeValue   = systemtest.GaugeValue
	series       = systemtest.Series
)

// messages is troupe_messages_total of typ, kind and outcome.
func messages(t *testing.T, reg prometheus.Gatherer, typ, kind, outcome string) float64 {
	t.Helper()
	return counterValue(t, reg, "troupe_messages_total", "type", typ, "kind", kind, "outcome", outcome)
}

func TestMessageMetricsCountTellsAndAsksByTypeAndOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, full := newGate(), newGate()
	def := probe("mprobe", g, nil, actor.WithAskTimeout(time.Minute))
	small := probe("mfull", full, nil, actor.WithMailbox(1, actor.Refuse))
	s := newStandalone(t, system.Config{Metrics: reg}, def, small)
	ctx := systemtest.Ctx(t)
	t.Cleanup(func() { close(g.open) })

	for range 3 {
		if _, err := actor.Ask(ctx, def.Ref(s, "k"), Do{Op: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := actor.Ask(ctx, def.Ref(s, "k"), Do{Op: "error"}); !errors.Is(err, actor.ErrActorFailed) {
			t.Fatalf("ask of a failing handler: %v, want ErrActorFailed", err)
		}
	}
	for range 4 {
		if err := def.Ref(s, "k").Tell(ctx, Note{Op: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// Tells count as ok once their actor took them: the answer to an ask
	// queued behind them says it did (its goroutine adds them to the
	// metric when it parks, see below).
	if _, err := actor.Ask(ctx, def.Ref(s, "k"), Do{Op: "x"}); err != nil {
		t.Fatal(err)
	}
	// A handler held at the gate: an ask with a deadline times out.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := actor.Ask(short, def.Ref(s, "slow"), Do{Op: "block"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ask past its deadline: %v, want DeadlineExceeded", err)
	}
	// A mailbox of one behind a held handler: the second message is refused.
	if err := small.Ref(s, "f").Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	systemtest.Recv(t, full.entered, "the held handler")
	if err := small.Ref(s, "f").Tell(ctx, Note{Op: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := small.Ref(s, "f").Tell(ctx, Note{Op: "x"}); !errors.Is(err, actor.ErrMailboxFull) {
		t.Fatalf("tell to a full mailbox: %v, want ErrMailboxFull", err)
	}
	if _, err := actor.Ask(ctx, small.Ref(s, "f"), Do{Op: "x"}); !errors.Is(err, actor.ErrMailboxFull) {
		t.Fatalf("ask to a full mailbox: %v, want ErrMailboxFull", err)
	}
	// An empty key is no address: nothing is delivered.
	if err := small.Ref(s, "").Tell(ctx, Note{Op: "x"}); err == nil {
		t.Fatal("a tell to an empty key succeeded")
	}

	// A goroutine adds the tells it took to the metric when it parks (or
	// ends its run, or every thousand): the held actor's not yet.
	if got := messages(t, reg, "mfull", "tell", "ok"); got != 0 {
		t.Errorf("troupe_messages_total{type=mfull,kind=tell,outcome=ok} = %v while its actor's goroutine is held, want 0", got)
	}
	close(full.open)
	systemtest.Await(t, func() error {
		if got := messages(t, reg, "mfull", "tell", "ok"); got != 2 {
			return fmt.Errorf("troupe_messages_total{type=mfull,kind=tell,outcome=ok} = %v once its actor was released, want the 2 tells it took", got)
		}
		if got := messages(t, reg, "mprobe", "tell", "ok"); got != 4 {
			return fmt.Errorf("troupe_messages_total{type=mprobe,kind=tell,outcome=ok} = %v, want the 4 tells its actor took", got)
		}
		return nil
	})
	for _, want := range []struct {
		typ, kind, outcome string
		n                  float64
	}{
		{"mprobe", "ask", "ok", 4}, {"mprobe", "ask", "failed", 2}, {"mprobe", "ask", "timeout", 1},
		{"mprobe", "ask", "refused", 0}, {"mprobe", "ask", "undelivered", 0},
		{"mprobe", "tell", "refused", 0}, {"mprobe", "tell", "timeout", 0},
		{"mfull", "tell", "refused", 1}, {"mfull", "tell", "undelivered", 1},
		{"mfull", "ask", "refused", 1}, {"mfull", "ask", "ok", 0},
	} {
		if got := messages(t, reg, want.typ, want.kind, want.outcome); got != want.n {
			t.Errorf("troupe_messages_total{type=%q,kind=%q,outcome=%q} = %v, want %v", want.typ, want.kind, want.outcome, got, want.n)
		}
	}
	for _, m := range family(t, reg, "troupe_messages_total").GetMetric() {
		if hasLabels(m, []string{"type", "mprobe", "kind", "tell", "outcome", "failed"}) {
			t.Error("a tell/failed series exists: a tell's handler answers nobody, so none should")
		}
	}
	h := sample(t, reg, "troupe_ask_duration_seconds", "type", "mprobe").GetHistogram()
	if h.GetSampleCount() != 7 {
		t.Errorf("troupe_ask_duration_seconds{type=mprobe} counts %d asks, want the 7 made", h.GetSampleCount())
	}
	if h.GetSampleSum() < 0.020 {
		t.Errorf("troupe_ask_duration_seconds{type=mprobe} sums %vs, want at least the 20 ms the timed-out ask waited", h.GetSampleSum())
	}
	if n := sample(t, reg, "troupe_ask_duration_seconds", "type", "mfull").GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("troupe_ask_duration_seconds{type=mfull} counts %d asks, want 1", n)
	}
}

func TestAPipedAskIsCountedWhenItsAnswerArrives(t *testing.T) {
	reg := prometheus.NewRegistry()
	answered := make(chan string, 1)
	target := probe("ptarget", nil, nil)
	piper := actor.Define("piper", func(c *actor.Context[int, Msg], m Msg) error {
		switch m := m.(type) {
		case Note:
			if m.Op == "go" {
				actor.Pipe(c, target.Ref(c.System(), "t"), Do{Op: "x"}, func(r string, err error) Msg {
					if err != nil {
						return Note{Op: "err " + err.Error()}
					}
					return Note{Op: "got " + r}
				})
				return nil
			}
			answered <- m.Op
		}
		return nil
	})
	s := newStandalone(t, system.Config{Metrics: reg}, target, piper)
	if err := piper.Ref(s, "p").Tell(systemtest.Ctx(t), Note{Op: "go"}); err != nil {
		t.Fatal(err)
	}
	if got := systemtest.Recv(t, answered, "the piped answer"); got != "got x 1" {
		t.Fatalf("piped answer %q, want %q", got, "got x 1")
	}
	if got := messages(t, reg, "ptarget", "ask", "ok"); got != 1 {
		t.Errorf("troupe_messages_total{type=ptarget,kind=ask,outcome=ok} = %v after one piped ask, want 1", got)
	}
	if n := sample(t, reg, "troupe_ask_duration_seconds", "type", "ptarget").GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("troupe_ask_duration_seconds{type=ptarget} counts %d asks, want 1", n)
	}
}

// familyValues returns every series of the counter family name, by its
// labels' text.
func familyValues(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range family(t, reg, name).GetMetric() {
		out[fmt.Sprint(m.GetLabel())] = m.GetCounter().GetValue()
	}
	return out
}

func TestMemberCountersKeepWhatEarlierIncarnationsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	systems := startClusterTweaked(t, 2, func(i int, cfg *system.Config) {
		if i == 0 {
			cfg.Metrics = reg
		}
	})
	ctx := systemtest.Ctx(t)
	key := remoteKey(t, systems[0], systems[1])
	if _, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Get{}); err != nil {
		t.Fatal(err)
	}
	counters := []string{"troupe_wire_sent_frames_total", "troupe_wire_sent_bytes_total",
		"troupe_wire_received_frames_total", "troupe_wire_received_bytes_total"}
	before := map[string]map[string]float64{}
	for _, name := range counters {
		before[name] = familyValues(t, reg, name)
	}
	if sent := before["troupe_wire_sent_frames_total"]; sent[fmt.Sprint(sample(t, reg, "troupe_wire_sent_frames_total", "stream", "application").GetLabel())] == 0 {
		t.Fatal("no application frame sent for an ask to a key on the other member")
	}
	system.ForceRejoin(systems[0])
	systemtest.WaitUntil(t, "the rejoin", func() bool { return systems[0].Stats().Rejoins == 1 })
	for _, name := range counters {
		for labels, v := range familyValues(t, reg, name) {
			if v < before[name][labels] {
				t.Errorf("%s%s went back from %v to %v when the member rejoined", name, labels, before[name][labels], v)
			}
		}
	}
}
