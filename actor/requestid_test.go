package actor_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// Request ids on the local path: what the handler sees, what its own
// asks carry, what failures and logs name.

type RIDMsg interface{ ridMsg() }

// WhoAsks answers the request id the handler sees.
type WhoAsks struct{ actor.Reply[RIDMsg, string] }

// Hop asks WhoAsks of Target with the handler's Context (or, when Name is
// set, with WithRequestID(c, Name)) and answers what Target saw.
type Hop struct {
	actor.Reply[RIDMsg, string]
	Target, Name string
}

// PipeHop pipes WhoAsks to Target and answers, deferred, what Target saw.
type PipeHop struct {
	actor.Reply[RIDMsg, string]
	Target string
}

// IDNote records the request id the handler sees while handling a tell;
// IDTimer sets a timer that sends IDNote.
type IDNote struct{}
type IDTimer struct{}

// Fail makes the handler fail as Kind says: "error", "panic", "declared",
// "block" (until its asker gives up).
type Fail struct {
	actor.Reply[RIDMsg, string]
	Kind string
}

type pipedID struct {
	d   actor.Deferred[string]
	id  string
	err error
}

func (WhoAsks) ridMsg() {}
func (Hop) ridMsg()     {}
func (PipeHop) ridMsg() {}
func (IDNote) ridMsg()  {}
func (IDTimer) ridMsg() {}
func (Fail) ridMsg()    {}
func (pipedID) ridMsg() {}

var errRIDDeclared = errors.New("rid: refused")

// ridDef returns a definition of the messages above whose tells and
// timers report the id they see on notes, counting the asks it handles.
func ridDef(notes chan<- string, handled *atomic.Int64) *actor.Def[int, RIDMsg] {
	var def *actor.Def[int, RIDMsg]
	def = actor.Define("rid", func(c *actor.Context[int, RIDMsg], m RIDMsg) error {
		switch m := m.(type) {
		case WhoAsks:
			handled.Add(1)
			return actor.Respond(c, m, c.RequestID())
		case Hop:
			var hc context.Context = c
			if m.Name != "" {
				hc = actor.WithRequestID(c, m.Name)
			}
			got, err := actor.Ask(hc, def.Ref(c.System(), m.Target), WhoAsks{})
			if err != nil {
				return err
			}
			return actor.Respond(c, m, got)
		case PipeHop:
			d := actor.Defer(c, m)
			actor.Pipe(c, def.Ref(c.System(), m.Target), WhoAsks{}, func(id string, err error) RIDMsg {
				return pipedID{d: d, id: id, err: err}
			})
		case pipedID:
			if m.err != nil {
				m.d.Fail(m.err)
			} else {
				m.d.Resolve(m.id)
			}
		case IDNote:
			notes <- c.RequestID()
		case IDTimer:
			c.After("note", 0, IDNote{})
		case Fail:
			switch m.Kind {
			case "error":
				return errors.New("ledger unreadable")
			case "panic":
				panic("ledger torn")
			case "declared":
				return errRIDDeclared
			case "block":
				<-c.Done()
			}
		}
		return nil
	}, actor.WithErrors(errRIDDeclared)).WithMessages(WhoAsks{}, Hop{}, PipeHop{}, IDNote{}, IDTimer{}, Fail{})
	return def
}

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.list = append(r.list, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// attr returns the value of the attribute key of the first record with
// message msg, and whether there is one.
func (r *records) attr(msg, key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		if rec.Message != msg {
			continue
		}
		var v string
		var found bool
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v, found = a.Value.String(), true
				return false
			}
			return true
		})
		return v, found
	}
	return "", false
}

func (r *records) has(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		if rec.Message == msg {
			return true
		}
	}
	return false
}

var madeID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func newRIDSystem(t *testing.T, logs *records) (*actor.Def[int, RIDMsg], actor.System, chan string, *atomic.Int64) {
	t.Helper()
	notes := make(chan string, 4)
	handled := new(atomic.Int64)
	def := ridDef(notes, handled)
	cfg := system.Config{}
	if logs != nil {
		cfg.Logger = slog.New(logs)
	}
	sys := systemtest.NewSystem(t, cfg, def)
	return def, sys, notes, handled
}

func TestTheHandlerSeesTheRequestIDItsAskerNamed(t *testing.T) {
	def, sys, _, _ := newRIDSystem(t, nil)
	got, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "req-42"), def.Ref(sys, "a"), WhoAsks{})
	if err != nil || got != "req-42" {
		t.Fatalf("got %q, %v: want the handler to see req-42", got, err)
	}
}

func TestEveryAskWithoutANamedIDGetsANewOne(t *testing.T) {
	def, sys, _, _ := newRIDSystem(t, nil)
	seen := map[string]bool{}
	for i := range 100 {
		got, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "a"), WhoAsks{})
		if err != nil || !madeID.MatchString(got) || seen[got] {
			t.Fatalf("ask %d: got %q, %v: want a new id of 32 lower-case hex digits (seen %d)", i, got, err, len(seen))
		}
		seen[got] = true
	}
	// Another system makes ids of another prefix.
	def2, sys2, _, _ := newRIDSystem(t, nil)
	got, err := actor.Ask(systemtest.Ctx(t), def2.Ref(sys2, "a"), WhoAsks{})
	for id := range seen {
		if err != nil || got[:16] == id[:16] {
			t.Fatalf("got %q, %v: want an id whose prefix differs from the first system's %q", got, err, id[:16])
		}
		break
	}
}

func TestTellsAndTimersHaveNoRequestID(t *testing.T) {
	def, sys, notes, _ := newRIDSystem(t, nil)
	ref := def.Ref(sys, "a")
	// Told with a context that names an id: a tell carries none.
	if err := ref.Tell(actor.WithRequestID(systemtest.Ctx(t), "told"), IDNote{}); err != nil {
		t.Fatal(err)
	}
	if got := systemtest.Recv(t, notes, "the tell's note"); got != "" {
		t.Fatalf("a tell's handler sees %q, want \"\"", got)
	}
	if err := ref.Tell(systemtest.Ctx(t), IDTimer{}); err != nil {
		t.Fatal(err)
	}
	if got := systemtest.Recv(t, notes, "the timer's note"); got != "" {
		t.Fatalf("a timer's handler sees %q, want \"\"", got)
	}
}

func TestAHandlersAsksCarryTheIDOfTheAskItHandles(t *testing.T) {
	def, sys, _, _ := newRIDSystem(t, nil)
	got, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "one-request"), def.Ref(sys, "a"), Hop{Target: "b"})
	if err != nil || got != "one-request" {
		t.Fatalf("got %q, %v: want the actor asked by the handler to see one-request", got, err)
	}
	got, err = actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "one-request"), def.Ref(sys, "a"), Hop{Target: "b", Name: "another"})
	if err != nil || got != "another" {
		t.Fatalf("got %q, %v: want the id the handler named", got, err)
	}
	got, err = actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "piped"), def.Ref(sys, "a"), PipeHop{Target: "b"})
	if err != nil || got != "piped" {
		t.Fatalf("got %q, %v: want the actor piped to by the handler to see piped", got, err)
	}
}

func TestAnInvalidRequestIDFailsTheAskUnsent(t *testing.T) {
	def, sys, _, handled := newRIDSystem(t, nil)
	for _, id := range []string{"", strings.Repeat("a", 65), "a b", "é", "tab\t", "\x7f"} {
		_, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), id), def.Ref(sys, "a"), WhoAsks{})
		if !errors.Is(err, actor.ErrInvalidRequestID) {
			t.Errorf("id %q: got %v, want ErrInvalidRequestID", id, err)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d asks with invalid ids were handled, want none", n)
	}
	longest := strings.Repeat("~", 64)
	if got, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), longest), def.Ref(sys, "a"), WhoAsks{}); err != nil || got != longest {
		t.Fatalf("got %q, %v: want 64 visible bytes accepted", got, err)
	}
}

func TestFailuresNameTheRequestID(t *testing.T) {
	def, sys, _, _ := newRIDSystem(t, nil)
	for _, kind := range []string{"error", "panic"} {
		_, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "failing-"+kind), def.Ref(sys, kind), Fail{Kind: kind})
		var fe *actor.FailedError
		if !errors.As(err, &fe) || fe.RequestID != "failing-"+kind || !strings.Contains(err.Error(), "failing-"+kind) {
			t.Fatalf("%s: got %v, want a *FailedError with RequestID failing-%s, in its text", kind, err, kind)
		}
		if actor.RequestIDOf(err) != "failing-"+kind {
			t.Errorf("%s: RequestIDOf = %q", kind, actor.RequestIDOf(err))
		}
	}
	// Made ids too: the asker reads it back from the error.
	_, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "error2"), Fail{Kind: "error"})
	if id := actor.RequestIDOf(err); !madeID.MatchString(id) {
		t.Fatalf("got %v: want a failure naming the id Ask made", err)
	}
	// A declared error is the handler's answer, as it was.
	if _, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "declared"), def.Ref(sys, "d"), Fail{Kind: "declared"}); err != errRIDDeclared {
		t.Fatalf("got %v (%T), want errRIDDeclared itself", err, err)
	}
}

func TestTheAskersOwnFailuresNameTheRequestID(t *testing.T) {
	def, sys, _, _ := newRIDSystem(t, nil)
	c, cancel := context.WithTimeout(actor.WithRequestID(systemtest.Ctx(t), "too-slow"), 50*time.Millisecond)
	defer cancel()
	_, err := actor.Ask(c, def.Ref(sys, "slow"), Fail{Kind: "block"})
	var re *actor.RequestError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) || re.RequestID != "too-slow" ||
		!strings.Contains(err.Error(), "too-slow") || !actor.Temporary(err) {
		t.Fatalf("got %v, want context.DeadlineExceeded in a *RequestError naming too-slow, temporary", err)
	}
	// A failure of the handler passed on by another names the request:
	// one request, one id.
	_, err = actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "passed"), def.Ref(sys, "a"), Hop{Target: "a"})
	if !errors.Is(err, actor.ErrAskCycle) || actor.RequestIDOf(err) != "passed" {
		t.Fatalf("got %v, want the cycle's failure naming passed", err)
	}
}

func TestTheFailureLogCarriesTheRequestID(t *testing.T) {
	logs := &records{}
	def, sys, _, _ := newRIDSystem(t, logs)
	if _, err := actor.Ask(actor.WithRequestID(systemtest.Ctx(t), "logged"), def.Ref(sys, "p"), Fail{Kind: "panic"}); !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	systemtest.WaitUntil(t, "the failure logged", func() bool { return logs.has("troupe: actor failed") })
	if id, ok := logs.attr("troupe: actor failed", "request_id"); !ok || id != "logged" {
		t.Fatalf("the failure's log has request_id %q (%v), want logged", id, ok)
	}
}
