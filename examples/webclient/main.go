// Command webclient serves a visit counter per URL path and account
// deposits over HTTP. The web server is not a cluster member: it reaches
// the actors, spread over a cluster, through a client.Client, and passes
// each request's context to actor.Ask, so a request that goes away
// withdraws its ask. Deposits are behind the idempotency middleware, so a
// client may retry one safely with the same Idempotency-Key.
// For a self-contained demo it starts a three-member cluster in the same
// process, on loopback.
//
//	go run ./examples/webclient
//	curl http://127.0.0.1:8080/hello
//	curl -X POST -H 'Idempotency-Key: dep-1' -d '{"amount":500}' http://127.0.0.1:8080/accounts/alice/deposits
package main

import (
	"context"
	"encoding/json"
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
	"github.com/troupe-go/troupe/client/idempotency"
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

// AccountMsg is what an account accepts.
type AccountMsg interface{ accountMsg() }

// Deposit adds Amount cents to the account and replies with the balance.
type Deposit struct {
	actor.Reply[AccountMsg, int64]
	Amount int64
}

func (Deposit) accountMsg() {}

// Account holds the balance of one account, its key, in cents. Its state
// is kept on three members, written to two of them before a reply leaves:
// a balance survives the loss of any one member.
var Account = actor.Define("account", func(c *actor.Context[int64, AccountMsg], m AccountMsg) error {
	switch m := m.(type) {
	case Deposit:
		c.SetState(c.State() + m.Amount)
		return actor.Respond(c, m, c.State())
	}
	return nil
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(Deposit{})

// Deposits serves POST /accounts/{id}/deposits with a JSON body
// {"amount": cents}: it credits the account and answers 201 with the
// balance. A deposit is not safe to run twice, so Routes puts it behind
// the idempotency middleware: a client that lost the answer sends the same
// request with the same Idempotency-Key and gets the first answer back.
func Deposits(sys actor.System) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d struct {
			Amount int64 `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil || d.Amount <= 0 {
			http.Error(w, `want {"amount": cents > 0}`, http.StatusBadRequest)
			return
		}
		balance, err := actor.Ask(r.Context(), Account.Ref(sys, r.PathValue("id")), Deposit{Amount: d.Amount})
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "{\"account\":%q,\"deposited\":%d,\"balance\":%d}\n", r.PathValue("id"), d.Amount, balance)
		case errors.Is(err, actor.ErrUnavailable):
			// May or may not have happened: the same key tells on retry.
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// Routes serves the visit counters and, behind the idempotency
// middleware with the records in store, the deposits.
func Routes(sys actor.System, store idempotency.Store) (http.Handler, error) {
	guard, err := idempotency.New(idempotency.Config{Store: store, App: "webclient"})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{id}/deposits", Deposits(sys))
	mux.Handle("/", Visits(sys))
	return guard(mux), nil
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
	// The deposits' records live in the cluster: any web server in front
	// of it answers a retry.
	store, err := idempotency.NewActorStore(c, idempotency.ActorConfig{})
	if err != nil {
		return err
	}
	routes, err := Routes(c, store)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes, ReadHeaderTimeout: 5 * time.Second}
	fmt.Printf("a counter per path, over %d members; try: curl http://%s/hello\n", len(members), ln.Addr())
	fmt.Printf("a deposit, safe to retry: curl -X POST -H 'Idempotency-Key: dep-1' -d '{\"amount\":500}' http://%s/accounts/alice/deposits\n", ln.Addr())
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
		sys, err := system.Start(ctx, system.Config{Actors: []actor.Definition{Page, Account, idempotency.Records}, Cluster: &cc})
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
