package runtime

import (
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// Reply stands in, for these tests, for actor.Reply: request types embed
// it.
type Reply[M, R any] struct{}

// tctx is the typed context of the tests' definitions, as actor.Context
// wraps a run's Context.
type tctx[S, M any] struct{ *Context[S, M, tctx[S, M]] }

// testDef is a definition as package actor builds one.
type testDef[S, M any] struct{ spec Spec[S, M, tctx[S, M]] }

// Define returns a definition with the default options.
func Define[S, M any](name string, h func(c *tctx[S, M], m M) error) *testDef[S, M] {
	return &testDef[S, M]{spec: Spec[S, M, tctx[S, M]]{
		Name: name, Handler: h,
		Wrap:    func(rc *Context[S, M, tctx[S, M]]) tctx[S, M] { return tctx[S, M]{rc} },
		Mailbox: 1024, Refuse: true, Idle: time.Minute, AskTimeout: 10 * time.Second,
		BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second, Replicas: 1,
		Codec: codec.New[M](),
	}}
}

// Instantiate creates d's runtime in h.
func (d *testDef[S, M]) Instantiate(h *host.Host) host.Kind { return NewKind(h, &d.spec) }
