package runtime

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// inlMsg is both a tell and an ask: the handler logs its tag and, asked,
// answers how many messages it logged.
type inlMsg struct {
	Reply[inlMsg, int]
	Tag string
}

type inlineFixture struct {
	k  *kind[int, inlMsg, tctx[int, inlMsg]]
	mu sync.Mutex
	// log holds the tags handled, in order.
	log     []string
	dropped int
	// entered and release, when set, make the handler of tag "block"
	// signal and wait.
	entered, release chan struct{}
}

func newInlineFixture(t *testing.T) *inlineFixture {
	t.Helper()
	f := &inlineFixture{}
	h := host.New(host.Settings{Observer: func(e host.Event) {
		if e.Kind == host.MessageDropped {
			f.mu.Lock()
			f.dropped++
			f.mu.Unlock()
		}
	}})
	t.Cleanup(func() { h.Close(context.Background()) })
	def := Define("inline", func(c *tctx[int, inlMsg], m inlMsg) error {
		if m.Tag == "fail" {
			return errors.New("boom")
		}
		if m.Tag == "relieve" {
			relieveInline(c) // as a remote ask from the handler does
			relieveInline(c)
		}
		if m.Tag == "block" && f.entered != nil {
			close(f.entered)
			<-f.release
		}
		f.mu.Lock()
		f.log = append(f.log, m.Tag)
		n := len(f.log)
		f.mu.Unlock()
		Respond(c.Context, n)
		return nil
	})
	f.k = def.Instantiate(h).(*kind[int, inlMsg, tctx[int, inlMsg]])
	h.Register(f.k)
	return f
}

// inbound encodes m as an ask from another node whose outcome goes to out.
func (f *inlineFixture) inbound(t *testing.T, key string, m inlMsg, out chan<- error) host.Inbound {
	t.Helper()
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	name, err := f.k.def.Codec.EncodeTo(buf, m)
	if err != nil {
		t.Fatal(err)
	}
	return host.Inbound{Key: key, Name: name, Body: slices.Clone(buf.Bytes()),
		Reply: host.ReplyFunc(func(_ []byte, err error) { out <- err })}
}

// claim delivers m as an ask to key's idle cell for an inline run, which
// it must get; it returns the ask's cancel and the run.
func (f *inlineFixture) claim(t *testing.T, key string, m inlMsg, out chan<- error) (cancel func(), run func(relieve func())) {
	t.Helper()
	w, run, err := f.k.DeliverRemoteInline(f.inbound(t, key, m, out))
	if err != nil || run == nil {
		t.Fatalf("not claimed: run %v, err %v", run != nil, err)
	}
	return w.Withdraw, run
}

func (f *inlineFixture) tell(t *testing.T, key, tag string) {
	t.Helper()
	if err := f.k.push(context.Background(), key, 0, inlMsg{Tag: tag}, nil, false, nil); err != nil {
		t.Fatal(err)
	}
}

func (f *inlineFixture) logged() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// idle waits until key's cell has no goroutine: the inline run needs it.
func (f *inlineFixture) idle(t *testing.T, key string) *cell[int, inlMsg, tctx[int, inlMsg]] {
	t.Helper()
	h, _ := f.k.locate(key)
	c := f.k.cellAt(h, key, false)
	for {
		c.mu.Lock()
		if !c.running {
			c.mu.Unlock()
			return c
		}
		c.shed = true // no lingering
		wake := c.wake
		c.mu.Unlock()
		if wake != nil {
			nudge(wake)
		}
		runtime.Gosched()
	}
}

// warm activates key and waits until its cell is idle.
func (f *inlineFixture) warm(t *testing.T, key string) {
	t.Helper()
	f.tell(t, key, "warm")
	for len(f.logged()) == 0 {
		runtime.Gosched()
	}
	f.idle(t, key)
}

// An ask claimed for an inline run holds the cell: what reaches the key
// before the run queues behind the ask, in order.
func TestInlineAskRunsBeforeWhatQueuedBehindIt(t *testing.T) {
	f := newInlineFixture(t)
	f.warm(t, "k")
	out := make(chan error, 1)
	_, run := f.claim(t, "k", inlMsg{Tag: "ask"}, out) // a warm idle cell
	f.tell(t, "k", "t1")
	f.tell(t, "k", "t2")
	if got := f.logged(); len(got) != 1 {
		t.Fatalf("handled %q before the run", got)
	}
	run(nil)
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	f.idle(t, "k")
	if got, want := f.logged(), []string{"warm", "ask", "t1", "t2"}; !slices.Equal(got, want) {
		t.Fatalf("handled %q, want %q", got, want)
	}
}

// A busy cell is not claimed: the ask queues as usual, and is answered.
func TestInlineAskToABusyCellQueues(t *testing.T) {
	f := newInlineFixture(t)
	f.warm(t, "k")
	f.entered, f.release = make(chan struct{}), make(chan struct{})
	f.tell(t, "k", "block")
	<-f.entered
	out := make(chan error, 1)
	_, run, err := f.k.DeliverRemoteInline(f.inbound(t, "k", inlMsg{Tag: "ask"}, out))
	if err != nil || run != nil {
		t.Fatalf("a busy cell was claimed: run %v, err %v", run != nil, err)
	}
	close(f.release)
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	if got, want := f.logged(), []string{"warm", "block", "ask"}; !slices.Equal(got, want) {
		t.Fatalf("handled %q, want %q", got, want)
	}
}

// An ask cancelled between its claim and its run is dropped by the run,
// which leaves the cell idle for the next message.
func TestInlineAskCancelledBeforeItsRunIsDropped(t *testing.T) {
	f := newInlineFixture(t)
	f.warm(t, "k")
	out := make(chan error, 1)
	cancel, run := f.claim(t, "k", inlMsg{Tag: "ask"}, out)
	cancel()
	run(nil)
	select {
	case err := <-out:
		t.Fatalf("a cancelled ask was answered: %v", err)
	default:
	}
	f.mu.Lock()
	dropped := f.dropped
	f.mu.Unlock()
	if dropped != 1 {
		t.Fatalf("%d messages reported dropped, want 1", dropped)
	}
	if c := f.idle(t, "k"); c.queuedLocked() != 0 {
		t.Fatalf("%d messages still counted after the run", c.queuedLocked())
	}
	_, run, _ = f.k.DeliverRemoteInline(f.inbound(t, "k", inlMsg{Tag: "next"}, out))
	if run == nil {
		t.Fatal("the cell was not idle after the dropped run")
	}
	run(nil)
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	if got, want := f.logged(), []string{"warm", "next"}; !slices.Equal(got, want) {
		t.Fatalf("handled %q, want %q", got, want)
	}
}

// A handler that fails inline fails the ask, as on the cell's goroutine.
func TestInlineAskOfAFailingHandlerFails(t *testing.T) {
	f := newInlineFixture(t)
	f.warm(t, "k")
	out := make(chan error, 1)
	_, run := f.claim(t, "k", inlMsg{Tag: "fail"}, out)
	run(nil)
	if err := <-out; !errors.Is(err, ErrActorFailed) {
		t.Fatalf("err = %v, want ErrActorFailed", err)
	}
}

// The relieve given to an inline run reaches the handler's Context, which
// calls it once, before it would wait for another node.
func TestInlineRunPassesItsRelieveToTheHandler(t *testing.T) {
	f := newInlineFixture(t)
	f.warm(t, "k")
	out := make(chan error, 1)
	_, run := f.claim(t, "k", inlMsg{Tag: "relieve"}, out)
	relieved := 0
	run(func() { relieved++ })
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	if relieved != 1 {
		t.Fatalf("relieved %d times, want 1", relieved)
	}
}
