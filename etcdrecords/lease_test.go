package etcdrecords

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/noderecord"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// calls counts the gRPC calls an etcd client makes, by method.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) count(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

// since returns the calls counted since before, by method.
func (c *calls) since(before map[string]int) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := map[string]int{}
	for m, n := range c.n {
		if n != before[m] {
			d[m] = n - before[m]
		}
	}
	return d
}

func (c *calls) snapshot() map[string]int { return c.since(nil) }

// A heartbeat after the first renews the record's lease: one
// transaction and one keep-alive, no lease granted or revoked.
func TestAHeartbeatIsOneTransactionAndOneKeepAlive(t *testing.T) {
	endpoint := startEtcd(t)
	counted := &calls{n: map[string]int{}}
	client := newCountingClient(t, endpoint, counted)
	s := newStore(t, client)
	admin := newClient(t, endpoint)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := noderecord.Record{Cluster: "shop", Role: "member", Node: "n1", Incarnation: "i"}
	if _, err := s.Put(ctx, r, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	lease := leaseOf(ctx, t, admin, s.Key(r.Key()))
	before := counted.snapshot()
	const beats = 5
	for range beats {
		r.Seq++
		if res, err := s.Put(ctx, r, 10*time.Second); err != nil || res.Decision != noderecord.Advanced {
			t.Fatalf("heartbeat seq %d: %v %v, want advanced", r.Seq, res.Decision, err)
		}
	}
	got := counted.since(before)
	want := map[string]int{
		"/etcdserverpb.KV/Range":             beats, // the read the ordering rule decides on: no proposal
		"/etcdserverpb.KV/Txn":               beats,
		"/etcdserverpb.Lease/LeaseKeepAlive": beats,
	}
	for m, n := range want {
		if got[m] != n {
			t.Errorf("%d heartbeats made %d calls of %s, want %d (all calls: %v)", beats, got[m], m, n, got)
		}
	}
	for m, n := range got {
		if _, ok := want[m]; !ok {
			t.Errorf("%d heartbeats made %d calls of %s, want none (all calls: %v)", beats, n, m, got)
		}
	}
	if now := leaseOf(ctx, t, admin, s.Key(r.Key())); now != lease {
		t.Errorf("the record's lease went from %x to %x: heartbeats should renew it", lease, now)
	}
	// Another TTL takes a lease of its own, and the old one goes.
	r.Seq++
	if _, err := s.Put(ctx, r, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if now := leaseOf(ctx, t, admin, s.Key(r.Key())); now == lease {
		t.Error("a heartbeat with another TTL kept the old lease")
	}
	if ttl, err := admin.TimeToLive(ctx, lease); err != nil || ttl.TTL != -1 {
		t.Errorf("the replaced lease: TTL %v (%v), want it revoked (-1)", ttl.TTL, err)
	}
}

// Heartbeats renew the lease: the record outlives many TTLs while they
// go on, and lapses one TTL after they stop.
func TestTheLeaseHoldsWhileHeartbeatsGoOnAndLapsesWhenTheyStop(t *testing.T) {
	endpoint := startEtcd(t)
	s := newStore(t, newClient(t, endpoint))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const ttl, heartbeat, beats = 2 * time.Second, 200 * time.Millisecond, 30 // 3 TTLs
	r := noderecord.Record{Cluster: "shop", Role: "member", Node: "n1", Incarnation: "i"}
	first, err := s.Put(ctx, r, ttl)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "shop", first.Revision)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for range beats {
		<-tick.C
		r.Seq++
		if res, err := s.Put(ctx, r, ttl); err != nil || res.Decision != noderecord.Advanced {
			t.Fatalf("heartbeat seq %d: %v %v, want advanced: the record lapsed while heartbeats went on", r.Seq, res.Decision, err)
		}
	}
	tick.Stop()
	stopped := time.Now()
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the lapse: %v", err)
		}
		if ev.Kind == noderecord.EventDelete {
			break
		}
		if ev.Record.Seq > beats {
			t.Fatalf("seq %d, past the last heartbeat", ev.Record.Seq)
		}
	}
	if after := time.Since(stopped); after < ttl-heartbeat {
		t.Errorf("the record lapsed %v after the last heartbeat, before its %v lease", after, ttl)
	}
	if _, err := s.Get(ctx, r.Key()); !errors.Is(err, noderecord.ErrNotFound) {
		t.Errorf("Get after the lapse = %v, want ErrNotFound", err)
	}
}

// leaseOf returns the lease that holds key.
func leaseOf(ctx context.Context, t *testing.T, c *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	got, err := c.Get(ctx, key)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("Get %s: %v (%d keys)", key, err, len(got.Kvs))
	}
	return clientv3.LeaseID(got.Kvs[0].Lease)
}

// newCountingClient is newClient whose calls counted counts.
func newCountingClient(t *testing.T, endpoint string, counted *calls) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop(), DialOptions: []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			counted.count(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			counted.count(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
