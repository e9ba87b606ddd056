// Command webclient serves a visit counter per URL path over HTTP. The
// web server is not a cluster member: it reaches the counters, spread
// over a cluster, through a client.Client, and passes each request's
// context to actor.Ask, so a request that goes away withdraws its ask.
// For a self-contained demo it starts a three-member cluster in the same
// process, on loopback.
//
//	go run ./examples/webclient
//	curl http://127.0.0.1:8080/hello
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// PageMsg is what a page counter accepts.
type PageMsg interface{ pageMsg() }

// Visit counts a visit and replies with the number of visits so far.
type Visit struct{ actor.Reply[PageMsg, int] }

func (Visit) pageMsg() {}

// Page counts the visits of one URL path, its key.
var Page = actor.Define("page", func(c *actor.Context[int, PageMsg], m PageMsg) error {
	switch m := m.(type) {
	case Visit:
		c.SetState(c.State() + 1)
		return actor.Respond(c, m, c.State())
	}
	return nil
}).WithMessages(Visit{})

// Visits counts a visit to the request's path and writes the total. sys
// is where the counters live: a client.Client here, a *system.System on a
// member.
func Visits(sys actor.System) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := actor.Ask(r.Context(), Page.Ref(sys, r.URL.Path), Visit{})
		switch {
		case err == nil:
			fmt.Fprintf(w, "%s: %d visits\n", r.URL.Path, n)
		case errors.Is(err, actor.ErrUnavailable):
			http.Error(w, err.Error(), http.StatusServiceUnavailable) // the owner is down: retry soon
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP listen address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := serve(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "webclient:", err)
		os.Exit(1)
	}
}

// serve runs the cluster, the client and the web server until ctx ends.
func serve(ctx context.Context, addr string) error {
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	members, err := startCluster(startCtx, 3)
	defer closeAll(members)
	if err != nil {
		return err
	}
	c, err := connect(startCtx, members)
	if err != nil {
		return err
	}
	defer c.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: Visits(c), ReadHeaderTimeout: 5 * time.Second}
	fmt.Printf("a counter per path, over %d members; try: curl http://%s/hello\n", len(members), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutCtx)
}

const clusterName = "webclient"

// startCluster starts n members on loopback with the fast timings; the
// first is the others' seed. It returns once every member sees all n
// alive: from then on they agree where each key lives. It returns the members it started, also
// on error, for closeAll.
func startCluster(ctx context.Context, n int) ([]*system.System, error) {
	var members []*system.System
	var seeds []string
	for range n {
		cc := cluster.FastConfig("127.0.0.1:0")
		cc.ClusterName = clusterName
		cc.Seeds = seeds
		sys, err := system.Start(ctx, system.Config{Actors: []actor.Definition{Page}, Cluster: &cc})
		if err != nil {
			return members, err
		}
		members = append(members, sys)
		seeds = []string{members[0].Addr()}
	}
	for _, s := range members {
		if _, err := s.WaitAlive(ctx, n); err != nil {
			return members, err
		}
	}
	return members, nil
}

// connect returns a client of the cluster once it sees all the members
// alive.
func connect(ctx context.Context, members []*system.System) (*client.Client, error) {
	c, err := client.New(ctx, client.Config{ClusterName: clusterName, Seeds: []string{members[0].Addr()}})
	if err != nil {
		return nil, err
	}
	if _, err := c.WaitAlive(ctx, len(members)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// closeAll closes members, each leaving the cluster in turn.
func closeAll(members []*system.System) error {
	var errs []error
	for i, s := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close member %d of %d (%s): %w", i+1, len(members), s.Addr(), err))
		}
		cancel()
	}
	return errors.Join(errs...)
}
