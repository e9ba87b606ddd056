package etcdrecords

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/noderecord"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// breakableWatcher stands between an etcd client and its watches (the
// client's Watcher, a seam etcd exports), so that a test can make the
// watches open now fail as etcd's own do: each gets one last response,
// then its channel closes, while the client keeps serving.
type breakableWatcher struct {
	clientv3.Watcher

	mu   sync.Mutex
	open []chan *clientv3.WatchResponse // each open watch's last response; nil: just close
}

// breakable puts a breakableWatcher into c.
func breakable(c *clientv3.Client) *breakableWatcher {
	b := &breakableWatcher{Watcher: c.Watcher}
	c.Watcher = b
	return b
}

// Watch implements clientv3.Watcher: etcd's watch, relayed until it is
// broken.
func (b *breakableWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := b.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	broken := make(chan *clientv3.WatchResponse, 1)
	b.mu.Lock()
	b.open = append(b.open, broken)
	b.mu.Unlock()
	go func() {
		defer close(out)
		for {
			var resp clientv3.WatchResponse
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				resp = r
			case last := <-broken:
				if last != nil {
					select {
					case out <- *last:
					case <-ctx.Done():
					}
				}
				return
			case <-ctx.Done():
				return
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// breakAll ends every watch open now with last (with no response first
// when last is nil).
func (b *breakableWatcher) breakAll(last *clientv3.WatchResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.open {
		ch <- last
	}
	b.open = nil
}

// Each way etcd's watch fails ends the store's watch with an error at
// once, not a wait for the caller's context, and the error stays.
func TestAWatchEndsWithAnErrorWhenEtcdsWatchFails(t *testing.T) {
	endpoint := startEtcd(t)
	for _, c := range []struct {
		name string
		last *clientv3.WatchResponse
		want error
	}{
		{"CancelledByTheServer", &clientv3.WatchResponse{Canceled: true, CancelReason: "permission denied"}, noderecord.ErrUnavailable},
		{"CompactedPastIt", &clientv3.WatchResponse{CompactRevision: 7, Canceled: true}, noderecord.ErrCompacted},
		{"EndedWithoutAResponse", nil, noderecord.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := newClient(t, endpoint)
			b := breakable(client)
			s := newStore(t, client)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			w, err := s.Watch(ctx, "shop", "")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			b.breakAll(c.last)
			for _, when := range []string{"first", "again"} {
				next, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := w.Next(next)
				cancel()
				if !errors.Is(err, c.want) || errors.Is(err, noderecord.ErrTimeout) {
					t.Errorf("Next (%s) after etcd's watch failed = %v, want %v at once", when, err, c.want)
				}
			}
		})
	}
}

// The client under the store closes (not the store): the watch fails
// as unavailable, not as closed by its caller, and not silently.
func TestAWatchEndsWithAnErrorWhenItsClientCloses(t *testing.T) {
	endpoint := startEtcd(t)
	client := newClient(t, endpoint)
	s := newStore(t, client)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := s.Watch(ctx, "shop", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	client.Close()
	next, cancelNext := context.WithTimeout(ctx, 10*time.Second)
	defer cancelNext()
	if _, err := w.Next(next); !errors.Is(err, noderecord.ErrUnavailable) {
		t.Errorf("Next once the etcd client closed = %v, want ErrUnavailable", err)
	}
}
