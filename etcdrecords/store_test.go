package etcdrecords

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/noderecord/recordtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd starts a one-member etcd on loopback ports, in a temporary
// directory, for the test's lifetime, and returns its client URL.
func startEtcd(t *testing.T) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Short ticks, so that a one-second lease is granted as asked (etcd's
	// shortest is 1.5 election timeouts) and elections take no time.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd was not ready within 30 s")
	}
	return client.String()
}

// freeURL returns an http URL on a loopback port nothing listens on
// now.
func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

func newClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t *testing.T, c *clientv3.Client) *Store {
	t.Helper()
	s, err := New(c, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	endpoint := startEtcd(t)
	admin := newClient(t, endpoint)
	recordtest.Run(t, func(t *testing.T) recordtest.Harness {
		// Each subtest starts from an empty key space, so that no lease
		// of an earlier one lapses during it and moves the revision.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := admin.Delete(ctx, DefaultPrefix+"/", clientv3.WithPrefix()); err != nil {
				t.Errorf("clean up: %v", err)
			}
		})
		c := newClient(t, endpoint)
		breaker := breakable(c)
		return recordtest.Harness{
			Store: newStore(t, c),
			BreakWatches: func(*testing.T) {
				breaker.breakAll(&clientv3.WatchResponse{Canceled: true, CancelReason: "the test broke the watch"})
			},
			ShortTTL: time.Second,
			Compact: func(ctx context.Context) error {
				got, err := admin.Get(ctx, "compact")
				if err != nil {
					return err
				}
				_, err = admin.Compact(ctx, got.Header.Revision, clientv3.WithCompactPhysical())
				return err
			},
			Unavailable: func(t *testing.T) noderecord.Store {
				u := freeURL(t)
				return newStore(t, newClient(t, u.String()))
			},
		}
	})
}

func TestKeyLayout(t *testing.T) {
	s, err := New(&clientv3.Client{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Key(noderecord.Key{Cluster: "shop", Role: "member", Node: "10.0.0.5:7400"})
	if want := "/troupe/clusters/shop/nodes/member/10.0.0.5:7400"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

func TestNewRefusesAPrefixThatBreaksTheLayout(t *testing.T) {
	for _, p := range []string{"troupe", "/troupe/"} {
		if _, err := New(&clientv3.Client{}, Config{Prefix: p}); err == nil {
			t.Errorf("New with Prefix %q succeeded, want an error", p)
		}
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New with a nil client succeeded")
	}
}

// A record this binary cannot read, under a cluster's prefix, is left
// out of snapshots and counted, and a put replaces it.
func TestAnUnreadableRecordIsCountedNotFatal(t *testing.T) {
	endpoint := startEtcd(t)
	c := newClient(t, endpoint)
	s := newStore(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	k := noderecord.Key{Cluster: "shop", Role: "member", Node: "n1"}
	if _, err := c.Put(ctx, s.Key(k), "\x81\xa1v\x09"); err != nil { // version 9
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "shop")
	if err != nil || len(snap.Records) != 0 || snap.Unreadable != 1 {
		t.Fatalf("Snapshot = %d records, %d unreadable, %v; want 0, 1, nil", len(snap.Records), snap.Unreadable, err)
	}
	res, err := s.Put(ctx, noderecord.Record{Cluster: "shop", Role: "member", Node: "n1", Incarnation: "i"}, time.Minute)
	if err != nil || res.Decision != noderecord.Restarted {
		t.Errorf("Put over an unreadable record = %v, %v; want restarted", res.Decision, err)
	}
}

func ExampleNew() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	store, _ := New(client, Config{})
	defer store.Close()
	fmt.Println(store.Key(noderecord.Key{Cluster: "shop", Role: "member", Node: "10.0.0.5:7400"}))
	// Output: /troupe/clusters/shop/nodes/member/10.0.0.5:7400
}
