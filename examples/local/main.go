// Command local runs Troupe in one process: a counter per page, asked by
// concurrent "visitors", an actor that fails and restarts from its saved
// state, and a key that idles out. It prints what happened.
//
//	go run ./examples/local
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// PageMsg is what a page counter accepts.
type PageMsg interface{ pageMsg() }

// Visit counts one visit.
type Visit struct{}

// Views asks for the number of visits so far.
type Views struct{ actor.Reply[PageMsg, int] }

// Crash makes the counter fail, to show a restart.
type Crash struct{}

func (Visit) pageMsg() {}
func (Views) pageMsg() {}
func (Crash) pageMsg() {}

// Page counts the visits of one page; the key is the page's path.
var Page = actor.Define("page", func(c *actor.Context[int, PageMsg], m PageMsg) error {
	switch m := m.(type) {
	case Visit:
		c.SetState(c.State() + 1)
	case Views:
		return actor.Respond(c, m, c.State())
	case Crash:
		return errors.New("simulated failure")
	}
	return nil
}, actor.WithIdleTimeout(200*time.Millisecond), actor.WithBackoff(20*time.Millisecond, time.Second))

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	// The observer reports each activation that ends: idle keys passivate.
	ended := make(chan system.Event, 16)
	sys, err := system.New(system.Config{
		Actors: []actor.Definition{Page},
		Observer: func(e system.Event) {
			if e.Kind == system.ActivationEnded {
				select {
				case ended <- e:
				default: // more than the story needs
				}
			}
		},
	})
	if err != nil {
		return err
	}
	defer sys.Close(ctx)
	pages := []string{"/", "/docs", "/blog"}
	if err := visit(ctx, out, sys, pages); err != nil {
		return err
	}

	// A failure restarts the actor from its last saved state.
	home := Page.Ref(sys, "/")
	_ = home.Tell(ctx, Crash{})
	_ = home.Tell(ctx, Visit{}) // queued behind the crash: handled after the restart
	n, err := actor.Ask(ctx, home, Views{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "after a crash and one more visit, / has %d views (restarts: %d)\n", n, sys.Stats().Restarts)

	// Idle keys passivate; the next message starts them afresh.
	for range pages {
		select {
		case <-ended:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the idle pages to passivate: %w", ctx.Err())
		}
	}
	fmt.Fprintf(out, "idle pages passivated: %d\n", len(pages))
	n, err = actor.Ask(ctx, home, Views{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "/ after passivation starts afresh: %d views\n", n)
	return sys.Close(ctx)
}

// visit has 8 visitors visit the pages 100 times each, concurrently, and
// prints the count of each page.
func visit(ctx context.Context, out io.Writer, sys *system.System, pages []string) error {
	var wg sync.WaitGroup
	for v := range 8 {
		wg.Go(func() {
			for i := range 100 {
				_ = Page.Ref(sys, pages[(v+i)%len(pages)]).Tell(ctx, Visit{})
			}
		})
	}
	wg.Wait()
	total := 0
	for _, p := range pages {
		n, err := actor.Ask(ctx, Page.Ref(sys, p), Views{})
		if err != nil {
			return err
		}
		total += n
		fmt.Fprintf(out, "page %-6s %3d views\n", p, n)
	}
	fmt.Fprintf(out, "total       %3d views from 8 visitors\n", total)
	return nil
}
