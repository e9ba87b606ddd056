package system_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"github.com/troupe-go/troupe/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// The transparency suite: one table of behaviours, each run three ways
// with the same expectations: asked from the member that owns the key
// (local), from another member, and from a client.

type BankMsg interface{ bankMsg() }

// Refuse makes the handler answer with the error Kind names.
type Refuse struct {
	actor.Reply[BankMsg, string]
	Kind string
}

type Deposit struct{ N int }

type Balance struct{ actor.Reply[BankMsg, int] }

// Big carries Data; the reply is its length.
type Big struct {
	actor.Reply[BankMsg, int]
	Data []byte
}

// Sleep blocks until its asker gives up, reporting its start and the end
// of its Context through the sleepers of ID.
type Sleep struct {
	actor.Reply[BankMsg, string]
	ID string
}

type Seq struct{ N int }

type Log struct{ actor.Reply[BankMsg, []int] }

type WhereAmI struct{ actor.Reply[BankMsg, string] }

// PipeRefuse makes the handler defer its reply, pipe Refuse{Kind} to the
// key Target, and answer with the piped outcome through the Deferred.
type PipeRefuse struct {
	actor.Reply[BankMsg, string]
	Target, Kind string
}

// Unlisted is a message type the definition does not list.
type Unlisted struct{ actor.Reply[BankMsg, string] }

// Fill asks for a reply of N bytes.
type Fill struct {
	actor.Reply[BankMsg, []byte]
	N int
}

// PassOn makes the handler ask Refuse{Kind} of the teller key Target and
// fail with that ask's error, as its own.
type PassOn struct {
	actor.Reply[BankMsg, string]
	Target, Kind string
}

// HereProbe answers whether Here, which is never encoded, arrived: only a
// message delivered in process keeps it.
type HereProbe struct {
	actor.Reply[BankMsg, bool]
	Here *int `msgpack:"-"`
}

// WhoAsks answers the request id the handler sees.
type WhoAsks struct{ actor.Reply[BankMsg, string] }

// HopWho asks WhoAsks of the bank key Target with the handler's Context
// and answers what Target saw.
type HopWho struct {
	actor.Reply[BankMsg, string]
	Target string
}

// WhoTraces answers the trace context the handler sees.
type WhoTraces struct {
	actor.Reply[BankMsg, actor.TraceContext]
}

// NoteTrace, a tell, records the trace context the handler sees under
// ID (see traceNotes).
type NoteTrace struct{ ID string }

// HopTrace, from the handler, asks WhoTraces of the bank key Target (or,
// with Tell, tells it NoteTrace{ID} and answers nothing: the note says),
// with the handler's Context, or with Set attached when not zero, and
// answers what Target saw.
type HopTrace struct {
	actor.Reply[BankMsg, actor.TraceContext]
	Target, ID string
	Tell       bool
	Set        actor.TraceContext
}

// TellHop, a tell, tells NoteTrace{ID} to the bank key Target with the
// handler's Context.
type TellHop struct{ Target, ID string }

// LogTrace, a tell, appends N and the trace context the handler sees
// to the key's entry in traceLogs.
type LogTrace struct{ N int }

// loggedTrace is what a LogTrace handler saw.
type loggedTrace struct {
	N  int
	TC actor.TraceContext
}

// traceLogs holds, per bank key, what its LogTrace handlers saw:
// key -> *traceLog.
var traceLogs sync.Map

type traceLog struct {
	mu   sync.Mutex
	seen []loggedTrace
}

func traceLogOf(key string) *traceLog {
	l, _ := traceLogs.LoadOrStore(key, new(traceLog))
	return l.(*traceLog)
}

func (l *traceLog) add(e loggedTrace) {
	l.mu.Lock()
	l.seen = append(l.seen, e)
	l.mu.Unlock()
}

func (l *traceLog) get() []loggedTrace {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// traceNotes connects NoteTrace handlers, on whichever member, with the
// test: ID -> chan actor.TraceContext.
var traceNotes sync.Map

func traceNote(id string) chan actor.TraceContext {
	ch, _ := traceNotes.LoadOrStore(id, make(chan actor.TraceContext, 1))
	return ch.(chan actor.TraceContext)
}

// piped is the piped answer, told to the piping actor itself (never
// encoded: it stays in its process).
type piped struct {
	d   actor.Deferred[string]
	r   string
	err error
}

func (Refuse) bankMsg()     {}
func (Deposit) bankMsg()    {}
func (Balance) bankMsg()    {}
func (Big) bankMsg()        {}
func (Sleep) bankMsg()      {}
func (Seq) bankMsg()        {}
func (Log) bankMsg()        {}
func (WhereAmI) bankMsg()   {}
func (PipeRefuse) bankMsg() {}
func (Unlisted) bankMsg()   {}
func (Fill) bankMsg()       {}
func (PassOn) bankMsg()     {}
func (HereProbe) bankMsg()  {}
func (piped) bankMsg()      {}
func (WhoAsks) bankMsg()    {}
func (HopWho) bankMsg()     {}
func (WhoTraces) bankMsg()  {}
func (NoteTrace) bankMsg()  {}
func (HopTrace) bankMsg()   {}
func (TellHop) bankMsg()    {}
func (LogTrace) bankMsg()   {}

var ErrInsufficientFunds = errors.New("bank: insufficient funds")

type InsufficientFundsError struct{ Need, Have int }

func (e *InsufficientFundsError) Error() string {
	return fmt.Sprintf("bank: need %d, have %d", e.Need, e.Have)
}

type BankState struct {
	Balance int
	Log     []int
}

// sleepers connects Sleep handlers, on whichever member, with the test.
var sleepers sync.Map // ID -> *sleeper

var sleeperIDs atomic.Int64

type sleeper struct{ started, stopped chan struct{} }

func sleeperOf(id string) *sleeper {
	s, _ := sleepers.LoadOrStore(id, &sleeper{started: make(chan struct{}), stopped: make(chan struct{})})
	return s.(*sleeper)
}

// Bank pipes to keys of its own kind: assigned in init, as Go requires.
var Bank *actor.Def[BankState, BankMsg]

func init() {
	Bank = actor.Define("bank", func(c *actor.Context[BankState, BankMsg], m BankMsg) error {
		switch m := m.(type) {
		case Refuse:
			switch m.Kind {
			case "sentinel":
				return ErrInsufficientFunds
			case "typed":
				return &InsufficientFundsError{Need: 7, Have: c.State().Balance}
			case "wrapped":
				return fmt.Errorf("withdraw 7: %w", ErrInsufficientFunds)
			case "undeclared":
				return errors.New("ledger unreadable")
			case "panic":
				panic("ledger torn")
			}
			return actor.Respond(c, m, "ok")
		case Deposit:
			c.Update(func(s BankState) BankState { s.Balance += m.N; return s })
		case Balance:
			return actor.Respond(c, m, c.State().Balance)
		case Big:
			return actor.Respond(c, m, len(m.Data))
		case Sleep:
			s := sleeperOf(m.ID)
			close(s.started)
			<-c.Done()
			close(s.stopped)
		case Seq:
			c.Update(func(s BankState) BankState { s.Log = append(slices.Clip(s.Log), m.N); return s })
		case Log:
			return actor.Respond(c, m, c.State().Log)
		case WhereAmI:
			return actor.Respond(c, m, c.Member())
		case PipeRefuse:
			d := actor.Defer(c, m)
			actor.Pipe(c, Bank.Ref(c.System(), m.Target), Refuse{Kind: m.Kind}, func(r string, err error) BankMsg {
				return piped{d: d, r: r, err: err}
			})
		case piped:
			if m.err != nil {
				m.d.Fail(m.err)
			} else {
				m.d.Resolve(m.r)
			}
		case Unlisted:
			return actor.Respond(c, m, "handled")
		case Fill:
			return actor.Respond(c, m, make([]byte, m.N))
		case PassOn:
			if _, err := actor.Ask(c, Teller.Ref(c.System(), m.Target), Refuse{Kind: m.Kind}); err != nil {
				return err
			}
			return actor.Respond(c, m, "ok")
		case HereProbe:
			return actor.Respond(c, m, m.Here != nil)
		case WhoAsks:
			return actor.Respond(c, m, c.RequestID())
		case HopWho:
			id, err := actor.Ask(c, Bank.Ref(c.System(), m.Target), WhoAsks{})
			if err != nil {
				return err
			}
			return actor.Respond(c, m, id)
		case WhoTraces:
			if got := actor.TraceContextFrom(c); got != c.TraceContext() {
				return fmt.Errorf("TraceContextFrom %v, Context.TraceContext %v", got, c.TraceContext())
			}
			return actor.Respond(c, m, c.TraceContext())
		case NoteTrace:
			traceNote(m.ID) <- c.TraceContext()
		case LogTrace:
			traceLogOf(c.Key()).add(loggedTrace{N: m.N, TC: c.TraceContext()})
		case TellHop:
			return Bank.Ref(c.System(), m.Target).Tell(c, NoteTrace{ID: m.ID})
		case HopTrace:
			var hc context.Context = c
			if !m.Set.IsZero() {
				hc = actor.WithTraceContext(c, m.Set)
			}
			if m.Tell {
				return Bank.Ref(c.System(), m.Target).Tell(hc, NoteTrace{ID: m.ID})
			}
			got, err := actor.Ask(hc, Bank.Ref(c.System(), m.Target), WhoTraces{})
			if err != nil {
				return err
			}
			return actor.Respond(c, m, got)
		}
		return nil
	}, actor.WithErrors(ErrInsufficientFunds, (*InsufficientFundsError)(nil)),
		actor.WithBackoff(time.Second, 10*time.Second)).
		WithMessages(Refuse{}, Deposit{}, Balance{}, Big{}, Sleep{}, Seq{}, Log{}, WhereAmI{}, PipeRefuse{}, Fill{}, PassOn{}, HereProbe{}, WhoAsks{}, HopWho{}, WhoTraces{}, NoteTrace{}, HopTrace{}, TellHop{}, LogTrace{}).
		WithInit(func(string) BankState { return BankState{Balance: 3} })
}

// Teller refuses like Bank but declares nothing: its refusals are
// failures, which a Bank handler passes on with PassOn.
var Teller = actor.Define("teller", func(c *actor.Context[int, BankMsg], m BankMsg) error {
	if m, ok := m.(Refuse); ok {
		switch m.Kind {
		case "sentinel":
			return ErrInsufficientFunds
		case "panic":
			panic("till torn")
		}
		return actor.Respond(c, m, "ok")
	}
	return nil
}).WithMessages(Refuse{})

// Unhosted is a definition no member hosts.
var Unhosted = actor.Define("unhosted", func(c *actor.Context[int, BankMsg], m BankMsg) error {
	return nil
}).WithMessages(Balance{})

// way is one way of reaching a key: the system that asks, and the key.
type way struct {
	name  string
	from  actor.System
	key   func(prefix string) string // a fresh key of the placement this way tests
	owner func(key string) string    // the member that serves key
}

// suiteLimit is the suite's message limit: smaller than the default, so
// that its messages over the limit stay cheap.
const suiteLimit = 1 << 20

func TestTransparencySuite(t *testing.T) {
	members := systemtest.StartCluster(t, 2, func(_ int, cfg *system.Config) {
		cfg.MaxMessage = suiteLimit
		// The hand-off window (LeaveTimeout) holds the first message to a
		// key a member gained and sends it through its router, encoded:
		// the local column must not run in it.
		cfg.LeaveTimeout = 100 * time.Millisecond
	}, Bank, Teller)
	a, b := members[0], members[1]
	systemtest.WaitUntil(t, "the members' hand-off windows close", func() bool {
		return !system.HandoffOpen(a) && !system.HandoffOpen(b)
	})
	cl, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{a.Addr()}, MaxMessage: suiteLimit})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	systemtest.Await(t, func() error {
		if n := len(cl.Members()); n < 2 {
			return fmt.Errorf("client knows %d members", n)
		}
		return nil
	})
	owner := func(key string) string { return system.OwnerOf(a, "bank", key) }
	keyOfOn := func(typ string, s *system.System) func(string) string {
		return func(prefix string) string {
			for i := range 10000 {
				k := fmt.Sprintf("%s-%d", prefix, i)
				if system.OwnerOf(a, typ, k) == s.Addr() && system.OwnerOf(b, typ, k) == s.Addr() {
					return k
				}
			}
			panic("no key of 10000 on " + s.Addr())
		}
	}
	keyOn := func(s *system.System) func(string) string { return keyOfOn("bank", s) }
	// inProcess makes keyOn(a)'s keys prove, before use, that a serves
	// them in process: a probe keeps what encoding would drop.
	inProcess := func(prefix string) string {
		k := keyOn(a)(prefix)
		here, err := actor.Ask(systemtest.Ctx(t), Bank.Ref(a, k), HereProbe{Here: new(int)})
		if err != nil || !here {
			t.Fatalf("probe of %s: %v, %v: the local column's key went through the router, encoded", k, here, err)
		}
		return k
	}
	ways := []way{
		{"local", a, inProcess, owner},
		{"member", a, keyOn(b), owner},
		{"client", cl, keyOn(b), owner},
	}
	big := make([]byte, suiteLimit)
	// atLimit is the length of Big's Data whose message encodes to the
	// limit exactly.
	atLimit := suiteLimit - bigOverhead(t)

	rows := []struct {
		name string
		run  func(t *testing.T, w way)
	}{
		{"declared sentinel arrives as itself", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("s")), Refuse{Kind: "sentinel"})
			if !errors.Is(err, ErrInsufficientFunds) || errors.Is(err, actor.ErrActorFailed) || err.Error() != ErrInsufficientFunds.Error() {
				t.Fatalf("got %v, want ErrInsufficientFunds itself, no failure", err)
			}
			if actor.Temporary(err) {
				t.Errorf("Temporary(%v) = true, want false for a declared error", err)
			}
		}},
		{"declared type arrives with its fields", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("t")), Refuse{Kind: "typed"})
			var fe *InsufficientFundsError
			if !errors.As(err, &fe) || fe.Need != 7 || fe.Have != 3 || errors.Is(err, actor.ErrActorFailed) {
				t.Fatalf("got %v, want *InsufficientFundsError{7, 3}", err)
			}
		}},
		{"wrapped declared error keeps the wrapper's text", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("w")), Refuse{Kind: "wrapped"})
			if !errors.Is(err, ErrInsufficientFunds) || err.Error() != "withdraw 7: "+ErrInsufficientFunds.Error() {
				t.Fatalf("got %v, want the wrapper's text around ErrInsufficientFunds", err)
			}
		}},
		{"seven refusals then a query: no restart", func(t *testing.T, w way) {
			key := w.key("r")
			ref := Bank.Ref(w.from, key)
			before := a.Stats().Restarts + b.Stats().Restarts
			for i := range 7 {
				if _, err := actor.Ask(ctx(t), ref, Refuse{Kind: "sentinel"}); !errors.Is(err, ErrInsufficientFunds) {
					t.Fatalf("refusal %d: %v", i, err)
				}
			}
			if err := ref.Tell(ctx(t), Deposit{N: 2}); err != nil {
				t.Fatal(err)
			}
			n, err := actor.Ask(ctx(t), ref, Balance{})
			if err != nil || n != 5 {
				t.Fatalf("balance %d, %v: want 5, the state kept through the refusals", n, err)
			}
			if after := a.Stats().Restarts + b.Stats().Restarts; after != before {
				t.Errorf("restarts went from %d to %d: a refusal restarted the actor", before, after)
			}
		}},
		{"undeclared error is a FailedError naming the member", func(t *testing.T, w way) {
			key := w.key("u")
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, key), Refuse{Kind: "undeclared"})
			var fe *actor.FailedError
			if !errors.As(err, &fe) || !errors.Is(err, actor.ErrActorFailed) {
				t.Fatalf("got %v (%T), want *actor.FailedError", err, err)
			}
			if fe.Member != w.owner(key) || fe.Actor != "bank/"+key || fe.Cause.Error() != "ledger unreadable" || fe.Panic {
				t.Errorf("got %+v, want member %s, actor bank/%s, cause text, no panic", fe, w.owner(key), key)
			}
			if actor.Temporary(err) {
				t.Errorf("Temporary(%v) = true, want false for a failure", err)
			}
		}},
		{"panic is a FailedError with a PanicError", func(t *testing.T, w way) {
			key := w.key("p")
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, key), Refuse{Kind: "panic"})
			var fe *actor.FailedError
			var pe *actor.PanicError
			if !errors.As(err, &fe) || !fe.Panic || !errors.As(err, &pe) || fmt.Sprint(pe.Value) != "ledger torn" {
				t.Fatalf("got %v, want a FailedError with Panic and a *PanicError of the panic's value", err)
			}
			if fe.Member != w.owner(key) {
				t.Errorf("member %q, want %q", fe.Member, w.owner(key))
			}
		}},
		{"message over the limit fails for good", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("big")), Big{Data: big})
			if !errors.Is(err, actor.ErrMessageTooLarge) || errors.Is(err, actor.ErrUnavailable) || actor.Temporary(err) {
				t.Fatalf("got %v, want ErrMessageTooLarge, not ErrUnavailable, not temporary", err)
			}
			err = Bank.Ref(w.from, w.key("bigtell")).Tell(ctx(t), Big{Data: big})
			if !errors.Is(err, actor.ErrMessageTooLarge) || actor.Temporary(err) {
				t.Fatalf("tell: got %v, want ErrMessageTooLarge", err)
			}
		}},
		{"message under the limit arrives", func(t *testing.T, w way) {
			n, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("half")), Big{Data: big[:suiteLimit/2]})
			if err != nil || n != suiteLimit/2 {
				t.Fatalf("got %d, %v: want the message of half the limit handled", n, err)
			}
		}},
		{"message at the limit arrives, one byte over fails", func(t *testing.T, w way) {
			ref := Bank.Ref(w.from, w.key("edge"))
			if n, err := actor.Ask(ctx(t), ref, Big{Data: big[:atLimit]}); err != nil || n != atLimit {
				t.Fatalf("at the limit: got %d, %v: want it handled", n, err)
			}
			if err := ref.Tell(ctx(t), Big{Data: big[:atLimit]}); err != nil {
				t.Fatalf("tell at the limit: got %v, want it sent", err)
			}
			if _, err := actor.Ask(ctx(t), ref, Big{Data: big[:atLimit+1]}); !errors.Is(err, actor.ErrMessageTooLarge) {
				t.Fatalf("one byte over: got %v, want ErrMessageTooLarge", err)
			}
			if err := ref.Tell(ctx(t), Big{Data: big[:atLimit+1]}); !errors.Is(err, actor.ErrMessageTooLarge) {
				t.Fatalf("tell one byte over: got %v, want ErrMessageTooLarge", err)
			}
		}},
		{"reply over the limit fails for good", func(t *testing.T, w way) {
			ref := Bank.Ref(w.from, w.key("bigreply"))
			_, err := actor.Ask(ctx(t), ref, Fill{N: suiteLimit})
			if !errors.Is(err, actor.ErrMessageTooLarge) || errors.Is(err, actor.ErrActorFailed) || actor.Temporary(err) {
				t.Fatalf("got %v, want ErrMessageTooLarge, no failure, not temporary", err)
			}
			// A []byte of n bytes encodes in n+5 (bin 32).
			if got, err := actor.Ask(ctx(t), ref, Fill{N: suiteLimit - 5}); err != nil || len(got) != suiteLimit-5 {
				t.Fatalf("at the limit: got %d bytes, %v: want the reply", len(got), err)
			}
			if _, err := actor.Ask(ctx(t), ref, Fill{N: suiteLimit - 4}); !errors.Is(err, actor.ErrMessageTooLarge) {
				t.Fatalf("one byte over: got %v, want ErrMessageTooLarge", err)
			}
		}},
		{"ask deadline", func(t *testing.T, w way) {
			id := fmt.Sprintf("deadline-%s-%d", w.name, sleeperIDs.Add(1))
			c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
			defer cancel()
			_, err := actor.Ask(c, Bank.Ref(w.from, w.key("dl")), Sleep{ID: id})
			if !errors.Is(err, context.DeadlineExceeded) || !actor.Temporary(err) {
				t.Fatalf("got %v, want context.DeadlineExceeded, temporary", err)
			}
			select {
			case <-sleeperOf(id).started: // it ran: its Context ends with the ask
				systemtest.Recv(t, sleeperOf(id).stopped, "the handler's context to end")
			default: // a loaded machine: the request expired before it ran
			}
		}},
		{"caller cancellation reaches the handler", func(t *testing.T, w way) {
			id := fmt.Sprintf("cancel-%s-%d", w.name, sleeperIDs.Add(1))
			c, cancel := context.WithCancel(ctx(t))
			s := sleeperOf(id)
			go func() {
				<-s.started
				cancel()
			}()
			_, err := actor.Ask(c, Bank.Ref(w.from, w.key("cancel")), Sleep{ID: id})
			if !errors.Is(err, context.Canceled) || actor.Temporary(err) {
				t.Fatalf("got %v, want context.Canceled, not temporary", err)
			}
			systemtest.Recv(t, s.stopped, "the handler's context to end")
		}},
		{"unlisted message type", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Bank.Ref(w.from, w.key("unl")), Unlisted{})
			if !errors.Is(err, actor.ErrUndecodable) || actor.Temporary(err) {
				t.Fatalf("got %v, want ErrUndecodable", err)
			}
		}},
		{"unhosted actor type", func(t *testing.T, w way) {
			_, err := actor.Ask(ctx(t), Unhosted.Ref(w.from, w.key("unh")), Balance{})
			if !errors.Is(err, actor.ErrUnknownActor) || actor.Temporary(err) {
				t.Fatalf("got %v, want ErrUnknownActor", err)
			}
		}},
		{"tells from one sender keep their order", func(t *testing.T, w way) {
			ref := Bank.Ref(w.from, w.key("seq"))
			var want []int
			for i := range 200 {
				if err := ref.Tell(ctx(t), Seq{N: i}); err != nil {
					t.Fatal(err)
				}
				want = append(want, i)
			}
			got, err := actor.Ask(ctx(t), ref, Log{})
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("got %v, %v: want 0..199 in order", got, err)
			}
		}},
		{"the handler knows its member", func(t *testing.T, w way) {
			key := w.key("where")
			got, err := actor.Ask(ctx(t), Bank.Ref(w.from, key), WhereAmI{})
			if err != nil || got != w.owner(key) {
				t.Fatalf("got %q, %v: want %q", got, err, w.owner(key))
			}
		}},
		{"a failure passed on is the passer's, not a panic, wherever the failed actor lives", func(t *testing.T, w way) {
			for _, on := range []*system.System{a, b} {
				// The teller does not declare the bank's sentinel: its
				// refusal is a failure, which the bank's own declaration
				// does not make an answer.
				for _, kind := range []string{"sentinel", "panic"} {
					// Keys of their own: a failure backs its key off.
					key := w.key("pass-" + kind + "-" + on.Addr())
					target := keyOfOn("teller", on)(w.name + "-pass-" + kind)
					_, err := actor.Ask(ctx(t), Bank.Ref(w.from, key), PassOn{Target: target, Kind: kind})
					var fe *actor.FailedError
					if !errors.As(err, &fe) || fe.Actor != "bank/"+key || fe.Panic || fe.Member != w.owner(key) {
						t.Fatalf("%s, teller on %s: got %v (%+v), want bank/%s's failure on %s, no panic",
							kind, on.Addr(), err, fe, key, w.owner(key))
					}
					var inner *actor.FailedError
					if !errors.As(fe.Cause, &inner) && !strings.Contains(fe.Cause.Error(), "teller/"+target) {
						t.Errorf("%s: cause %v, want the teller's failure", kind, fe.Cause)
					}
				}
			}
		}},
		{"the handler sees the request id its asker named", func(t *testing.T, w way) {
			id := "named-" + w.name
			got, err := actor.Ask(actor.WithRequestID(ctx(t), id), Bank.Ref(w.from, w.key("rid")), WhoAsks{})
			if err != nil || got != id {
				t.Fatalf("got %q, %v: want %q", got, err, id)
			}
		}},
		{"two asks get two ids", func(t *testing.T, w way) {
			ref := Bank.Ref(w.from, w.key("rids"))
			first, err1 := actor.Ask(ctx(t), ref, WhoAsks{})
			second, err2 := actor.Ask(ctx(t), ref, WhoAsks{})
			if err1 != nil || err2 != nil || len(first) != 32 || len(second) != 32 || first == second {
				t.Fatalf("got %q (%v) and %q (%v): want two different ids of 32 hex digits", first, err1, second, err2)
			}
		}},
		{"the request id survives a hop, wherever the next actor lives", func(t *testing.T, w way) {
			for _, on := range []*system.System{a, b} {
				id := "hop-" + w.name + "-" + on.Addr()
				target := keyOn(on)(w.name + "-hop-target")
				got, err := actor.Ask(actor.WithRequestID(ctx(t), id), Bank.Ref(w.from, w.key("hop")), HopWho{Target: target})
				if err != nil || got != id {
					t.Fatalf("next actor on %s: got %q, %v: want %q", on.Addr(), got, err, id)
				}
			}
		}},
		{"failures name the request id", func(t *testing.T, w way) {
			id := "failing-" + w.name
			_, err := actor.Ask(actor.WithRequestID(ctx(t), id), Bank.Ref(w.from, w.key("ridfail")), Refuse{Kind: "undeclared"})
			var fe *actor.FailedError
			if !errors.As(err, &fe) || fe.RequestID != id || !strings.Contains(err.Error(), id) {
				t.Fatalf("got %v, want a *FailedError naming %s", err, id)
			}
			_, err = actor.Ask(actor.WithRequestID(ctx(t), id), Bank.Ref(w.from, w.key("ridbig")), Big{Data: big})
			if !errors.Is(err, actor.ErrMessageTooLarge) || actor.RequestIDOf(err) != id || !strings.Contains(err.Error(), id) {
				t.Fatalf("too large: got %v, want ErrMessageTooLarge naming %s", err, id)
			}
			sid := fmt.Sprintf("rid-%s-%d", w.name, sleeperIDs.Add(1))
			c, cancel := context.WithTimeout(actor.WithRequestID(ctx(t), id), 100*time.Millisecond)
			defer cancel()
			_, err = actor.Ask(c, Bank.Ref(w.from, w.key("riddl")), Sleep{ID: sid})
			if !errors.Is(err, context.DeadlineExceeded) || actor.RequestIDOf(err) != id {
				t.Fatalf("deadline: got %v, want context.DeadlineExceeded naming %s", err, id)
			}
			select {
			case <-sleeperOf(sid).started:
				systemtest.Recv(t, sleeperOf(sid).stopped, "the handler's context to end")
			default:
			}
		}},
		{"the handler sees the trace context its asker attached", func(t *testing.T, w way) {
			ref := Bank.Ref(w.from, w.key("trace"))
			for _, tc := range []actor.TraceContext{traced, tracedWithState, {Parent: futureParent}} {
				got, err := actor.Ask(actor.WithTraceContext(ctx(t), tc), ref, WhoTraces{})
				if err != nil || got != tc {
					t.Fatalf("got %+v, %v: want the handler to see %+v", got, err, tc)
				}
			}
			if got, err := actor.Ask(ctx(t), ref, WhoTraces{}); err != nil || !got.IsZero() {
				t.Fatalf("without one: got %+v, %v: want none", got, err)
			}
		}},
		{"a tell carries its trace context", func(t *testing.T, w way) {
			id := fmt.Sprintf("tell-%s-%d", w.name, sleeperIDs.Add(1))
			ref := Bank.Ref(w.from, w.key("tracetell"))
			if err := ref.Tell(actor.WithTraceContext(ctx(t), tracedWithState), NoteTrace{ID: id}); err != nil {
				t.Fatal(err)
			}
			if got := systemtest.Recv(t, traceNote(id), "the note of the traced tell"); got != tracedWithState {
				t.Fatalf("the handler saw %+v, want %+v", got, tracedWithState)
			}
			id = fmt.Sprintf("untraced-%s-%d", w.name, sleeperIDs.Add(1))
			if err := ref.Tell(ctx(t), NoteTrace{ID: id}); err != nil {
				t.Fatal(err)
			}
			if got := systemtest.Recv(t, traceNote(id), "the note of the untraced tell"); !got.IsZero() {
				t.Fatalf("an untraced tell's handler saw %+v, want none", got)
			}
		}},
		{"the trace context survives a hop, wherever the next actor lives", func(t *testing.T, w way) {
			for _, on := range []*system.System{a, b} {
				target := keyOn(on)(w.name + "-trace-target")
				ref := Bank.Ref(w.from, w.key("tracehop"))
				got, err := actor.Ask(actor.WithTraceContext(ctx(t), traced), ref, HopTrace{Target: target})
				if err != nil || got != traced {
					t.Fatalf("ask on to %s: got %+v, %v: want %+v", on.Addr(), got, err, traced)
				}
				got, err = actor.Ask(actor.WithTraceContext(ctx(t), traced), ref, HopTrace{Target: target, Set: tracedWithState})
				if err != nil || got != tracedWithState {
					t.Fatalf("ask on to %s with another attached: got %+v, %v: want %+v", on.Addr(), got, err, tracedWithState)
				}
				id := fmt.Sprintf("hop-%s-%s-%d", w.name, on.Addr(), sleeperIDs.Add(1))
				if _, err := actor.Ask(actor.WithTraceContext(ctx(t), tracedWithState), ref, HopTrace{Target: target, ID: id, Tell: true}); !errors.Is(err, actor.ErrNoReply) {
					t.Fatalf("tell on to %s: %v, want ErrNoReply (the note answers)", on.Addr(), err)
				}
				if got := systemtest.Recv(t, traceNote(id), "the note of the tell on"); got != tracedWithState {
					t.Fatalf("tell on to %s: the next actor saw %+v, want %+v", on.Addr(), got, tracedWithState)
				}
				id = fmt.Sprintf("tellhop-%s-%s-%d", w.name, on.Addr(), sleeperIDs.Add(1))
				if err := ref.Tell(actor.WithTraceContext(ctx(t), traced), TellHop{Target: target, ID: id}); err != nil {
					t.Fatal(err)
				}
				if got := systemtest.Recv(t, traceNote(id), "the note of a tell told on"); got != traced {
					t.Fatalf("tell of a tell on to %s: the next actor saw %+v, want %+v", on.Addr(), got, traced)
				}
			}
		}},
		{"an invalid trace context fails the message unsent", func(t *testing.T, w way) {
			bad := actor.WithTraceContext(ctx(t), actor.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"})
			id := fmt.Sprintf("bad-%s-%d", w.name, sleeperIDs.Add(1))
			if err := Bank.Ref(w.from, w.key("badtrace")).Tell(bad, NoteTrace{ID: id}); !errors.Is(err, actor.ErrInvalidTraceContext) {
				t.Fatalf("tell: got %v, want ErrInvalidTraceContext", err)
			}
			if _, err := actor.Ask(bad, Bank.Ref(w.from, w.key("badtrace")), WhoTraces{}); !errors.Is(err, actor.ErrInvalidTraceContext) {
				t.Fatalf("ask: got %v, want ErrInvalidTraceContext", err)
			}
			if _, ok := traceNotes.Load(id); ok {
				t.Fatal("the invalid tell was handled")
			}
		}},
		{"declared errors through Pipe and Defer", func(t *testing.T, w way) {
			target := keyOn(a)(w.name + "-pipe-target") // its own: a failure backs it off
			ref := Bank.Ref(w.from, w.key("pipe"))
			_, err := actor.Ask(ctx(t), ref, PipeRefuse{Target: target, Kind: "sentinel"})
			if !errors.Is(err, ErrInsufficientFunds) || errors.Is(err, actor.ErrActorFailed) {
				t.Fatalf("sentinel: got %v, want ErrInsufficientFunds through the pipe and the deferred reply", err)
			}
			_, err = actor.Ask(ctx(t), ref, PipeRefuse{Target: target, Kind: "typed"})
			var fe *InsufficientFundsError
			if !errors.As(err, &fe) || fe.Need != 7 || fe.Have != 3 {
				t.Fatalf("typed: got %v, want *InsufficientFundsError{7, 3}", err)
			}
			_, err = actor.Ask(ctx(t), ref, PipeRefuse{Target: target, Kind: "undeclared"})
			if !errors.Is(err, actor.ErrActorFailed) {
				t.Fatalf("undeclared: got %v, want a failure", err)
			}
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			for _, w := range ways {
				t.Run(w.name, func(t *testing.T) {
					key := w.key
					w.key = func(prefix string) string { return key(w.name + "-" + prefix) } // keys of their own
					row.run(t, w)
				})
			}
		})
	}
}

func ctx(t *testing.T) context.Context { return systemtest.Ctx(t) }

// Trace contexts of the examples of the W3C specification, and one of a
// later version, which travels as it is.
var (
	traced          = actor.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	tracedWithState = actor.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", State: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}
	futureParent    = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-adds"
)

// bigOverhead is what Big's encoding adds to its Data's length, for Data
// of at least 64 KiB (a bin 32 header).
func bigOverhead(t *testing.T) int {
	const n = 1 << 16
	b, err := msgpack.Marshal(Big{Data: make([]byte, n)})
	if err != nil {
		t.Fatal(err)
	}
	return len(b) - n
}

// The message limit is the configured one, on members and clients alike,
// with compression set beside it.
func TestTheMessageLimitIsSetInTheConfig(t *testing.T) {
	const limit = 256 << 10
	members := systemtest.StartCluster(t, 2, func(_ int, cfg *system.Config) {
		cfg.MaxMessage = limit
		cfg.Compression = wire.Compression{Disable: true}
	}, Bank)
	cl, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{members[0].Addr()},
		MaxMessage: limit, Compression: wire.Compression{Codecs: []string{wire.CodecZstd}}})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	at := limit - bigOverhead(t) // Data whose message encodes to the limit
	data := make([]byte, at+1)
	for _, from := range []actor.System{members[0], members[1], cl} {
		for i := range 4 { // keys on either member
			ref := Bank.Ref(from, fmt.Sprintf("limit-%d", i))
			if _, err := actor.Ask(ctx(t), ref, Big{Data: data}); !errors.Is(err, actor.ErrMessageTooLarge) {
				t.Fatalf("one byte over the limit: got %v, want ErrMessageTooLarge", err)
			}
			if n, err := actor.Ask(ctx(t), ref, Big{Data: data[:at]}); err != nil || n != at {
				t.Fatalf("at the limit: got %d, %v: want it handled", n, err)
			}
		}
	}
}

func TestClientConfigValidatesTheMessageSettings(t *testing.T) {
	for _, cfg := range []client.Config{
		{Seeds: []string{"127.0.0.1:1"}, MaxMessage: -1},
		{Seeds: []string{"127.0.0.1:1"}, Compression: wire.Compression{Codecs: []string{"lz4"}}},
	} {
		if _, err := client.New(ctx(t), cfg); !errors.Is(err, client.ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
