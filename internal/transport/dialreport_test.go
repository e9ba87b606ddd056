package transport

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

// warnCounter counts the Warn records whose message starts with prefix.
type warnCounter struct {
	prefix string
	mu     sync.Mutex
	n      int
}

func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, w.prefix) {
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
	}
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

func (w *warnCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func TestRepeatedRefusalsFromOnePeerAreLoggedOnceAndReportedByDialError(t *testing.T) {
	warns := &warnCounter{prefix: "troupe: wire: handshake refused"}
	a := newTestNode(t, func(c *wire.Config) { c.Logger = slog.New(warns) })
	b := newTestNode(t, func(c *wire.Config) { c.ClusterName = "other" })
	if err := a.t.DialError(b.t.Self().Addr); err != nil {
		t.Fatalf("expected no dial error before any dial; got %v", err)
	}
	for range 20 {
		r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		waitReceipt(t, r)
	}
	if n := warns.count(); n != 1 {
		t.Fatalf("expected 20 refusals by one peer within %v to log one warning; got %d", refusalSummaryEvery, n)
	}
	var ref *wire.Refused
	if err := a.t.DialError(b.t.Self().Addr); !errors.As(err, &ref) || ref.Reason != wire.RefusedCluster {
		t.Fatalf("expected DialError to report the cluster-name refusal; got %v", err)
	}
}

func TestDialErrorClearsOnceAConnectionComesUp(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, nil)
	// A failed dial first: nothing listens at b's address yet.
	addr := b.t.Self().Addr
	a.t.noteDial(addr, errors.New("connection refused"))
	r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	if err := a.t.DialError(addr); err != nil {
		t.Fatalf("expected no dial error once connected; got %v", err)
	}
}
