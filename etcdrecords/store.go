package etcdrecords

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-go/troupe/noderecord"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultPrefix is the Config.Prefix of a zero Config.
const DefaultPrefix = "/troupe"

// Config configures a Store. The zero value is the default.
type Config struct {
	// Prefix is where the records live in etcd's key space, without a
	// trailing '/'. Default DefaultPrefix.
	Prefix string
	// Now sets Observed. Default time.Now.
	Now func() time.Time
}

// Store is a noderecord.Store in etcd. Create it with New.
type Store struct {
	client *clientv3.Client
	prefix string
	now    func() time.Time

	// closing ends at Close, and with it every watch.
	closing context.Context
	close   context.CancelFunc
	mu      sync.Mutex
	closed  bool

	// leases holds, by etcd key, the lease this store last attached to
	// the key and its TTL in seconds: the next accepted update of the
	// key renews it with one keep-alive instead of granting another.
	leasesMu sync.Mutex
	leases   map[string]heldLease
}

// heldLease is a lease this store attached to a key.
type heldLease struct {
	id      clientv3.LeaseID
	seconds int64
}

var _ noderecord.Store = (*Store)(nil)

// New returns a store over client, which carries the endpoints, TLS
// and credentials. The store does not close the client.
func New(client *clientv3.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("troupe: etcdrecords: nil client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("troupe: etcdrecords: Config.Prefix %q must start with '/' and not end with one", cfg.Prefix)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Store{client: client, prefix: cfg.Prefix, now: cfg.Now, closing: closing, close: cancel, leases: map[string]heldLease{}}, nil
}

// Key returns the etcd key of a record.
func (s *Store) Key(k noderecord.Key) string {
	return s.clusterPrefix(k.Cluster) + k.Role + "/" + k.Node
}

func (s *Store) clusterPrefix(cluster string) string {
	return s.prefix + "/clusters/" + cluster + "/nodes/"
}

// Put implements noderecord.Store.
func (s *Store) Put(ctx context.Context, r noderecord.Record, ttl time.Duration) (noderecord.PutResult, error) {
	if err := s.begin(ctx); err != nil {
		return noderecord.PutResult{}, opError("put", err)
	}
	if ttl <= 0 {
		ttl = noderecord.DefaultTimings().LeaseTTL
	}
	if err := r.Validate(); err != nil {
		return noderecord.PutResult{}, opError("put", err)
	}
	key := s.Key(r.Key())
	// Whole seconds, rounded up: etcd's unit.
	seconds := int64((ttl + time.Second - 1) / time.Second)
	var granted clientv3.LeaseID // granted by this call and not attached yet
	defer func() {
		if granted != 0 {
			s.revoke(ctx, granted) // granted, then not used
		}
	}()
	for {
		got, err := s.client.Get(ctx, key)
		if err != nil {
			return noderecord.PutResult{}, opError("put", s.backendError(ctx, err))
		}
		var stored *noderecord.Record
		var modRev int64
		var oldLease clientv3.LeaseID
		if len(got.Kvs) == 1 {
			kv := got.Kvs[0]
			modRev, oldLease = kv.ModRevision, clientv3.LeaseID(kv.Lease)
			// A record this binary cannot read is replaced, as a restart.
			if prev, err := noderecord.Decode(kv.Value); err == nil {
				stored = &prev
			} else {
				stored = &noderecord.Record{}
			}
		}
		d := noderecord.Decide(stored, r)
		if !d.Accepted() {
			return noderecord.PutResult{Decision: d, Revision: revision(got.Header.Revision)}, nil
		}
		lease, err := s.renew(ctx, key, oldLease, seconds)
		if err != nil {
			return noderecord.PutResult{}, opError("put", s.backendError(ctx, err))
		}
		if lease == 0 {
			if granted == 0 {
				g, err := s.client.Grant(ctx, seconds)
				if err != nil {
					return noderecord.PutResult{}, opError("put", s.backendError(ctx, err))
				}
				granted = g.ID
			}
			lease = granted
		}
		r.Observed = s.now()
		data, err := noderecord.Encode(r)
		if err != nil {
			return noderecord.PutResult{}, opError("put", err)
		}
		// Mod revision 0 is a key that does not exist.
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(data), clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			// It may have committed (a deadline or a broken connection
			// mid-commit): revoking the lease would delete the record it
			// put. A lease left unused lapses by itself.
			granted = 0
			s.forget(key)
			return noderecord.PutResult{}, opError("put", s.backendError(ctx, err))
		}
		if txn.Succeeded {
			if lease == granted {
				granted = 0
			}
			if oldLease != 0 && oldLease != lease {
				s.revoke(ctx, oldLease)
			}
			s.remember(key, heldLease{id: lease, seconds: seconds})
			return noderecord.PutResult{Decision: d, Revision: revision(txn.Header.Revision)}, nil
		}
		// Another writer came between the read and the write: decide
		// again on what it wrote.
	}
}

// renew renews with one keep-alive the lease that holds key, onto which
// an accepted update goes next, when this store attached it with the
// same TTL, and returns it; 0 when the update needs a lease of its own
// (no record, another writer's lease, another TTL, or the lease lapsed
// meanwhile). Renewed first, the lease cannot lapse between the write
// and its renewal.
func (s *Store) renew(ctx context.Context, key string, onKey clientv3.LeaseID, seconds int64) (clientv3.LeaseID, error) {
	s.leasesMu.Lock()
	held, ok := s.leases[key]
	s.leasesMu.Unlock()
	if !ok || onKey == 0 || held.id != onKey || held.seconds != seconds {
		return 0, nil
	}
	if _, err := s.client.KeepAliveOnce(ctx, onKey); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.forget(key)
			return 0, nil
		}
		return 0, err
	}
	return onKey, nil
}

func (s *Store) remember(key string, l heldLease) {
	s.leasesMu.Lock()
	s.leases[key] = l
	s.leasesMu.Unlock()
}

func (s *Store) forget(key string) {
	s.leasesMu.Lock()
	delete(s.leases, key)
	s.leasesMu.Unlock()
}

// revoke drops a lease that holds no record any more. It is tidiness:
// a lease left over lapses on its own, holding nothing.
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s.client.Revoke(ctx, id) //nolint:errcheck // see above
}

// Get implements noderecord.Store.
func (s *Store) Get(ctx context.Context, k noderecord.Key) (noderecord.Record, error) {
	if err := s.begin(ctx); err != nil {
		return noderecord.Record{}, opError("get", err)
	}
	if err := k.Validate(); err != nil {
		return noderecord.Record{}, opError("get", err)
	}
	got, err := s.client.Get(ctx, s.Key(k))
	if err != nil {
		return noderecord.Record{}, opError("get", s.backendError(ctx, err))
	}
	if len(got.Kvs) == 0 {
		return noderecord.Record{}, fmt.Errorf("troupe: get node record %s: %w", k, noderecord.ErrNotFound)
	}
	r, err := noderecord.Decode(got.Kvs[0].Value)
	if err != nil {
		return noderecord.Record{}, fmt.Errorf("troupe: get node record %s: %w", k, err)
	}
	return r, nil
}

// Remove implements noderecord.Store.
func (s *Store) Remove(ctx context.Context, k noderecord.Key, incarnation string) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, opError("remove", err)
	}
	if err := k.Validate(); err != nil {
		return false, opError("remove", err)
	}
	key := s.Key(k)
	for {
		got, err := s.client.Get(ctx, key)
		if err != nil {
			return false, opError("remove", s.backendError(ctx, err))
		}
		if len(got.Kvs) == 0 {
			return false, nil
		}
		kv := got.Kvs[0]
		if r, err := noderecord.Decode(kv.Value); err != nil || r.Incarnation != incarnation {
			return false, nil
		}
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return false, opError("remove", s.backendError(ctx, err))
		}
		if txn.Succeeded {
			s.forget(key)
			if kv.Lease != 0 {
				s.revoke(ctx, clientv3.LeaseID(kv.Lease))
			}
			return true, nil
		}
	}
}

// Snapshot implements noderecord.Store: one linearizable range read.
func (s *Store) Snapshot(ctx context.Context, cluster string) (noderecord.Snapshot, error) {
	if err := s.begin(ctx); err != nil {
		return noderecord.Snapshot{}, opError("snapshot", err)
	}
	if err := noderecord.ValidateCluster(cluster); err != nil {
		return noderecord.Snapshot{}, opError("snapshot", err)
	}
	got, err := s.client.Get(ctx, s.clusterPrefix(cluster), clientv3.WithPrefix())
	if err != nil {
		return noderecord.Snapshot{}, opError("snapshot", s.backendError(ctx, err))
	}
	snap := noderecord.Snapshot{Revision: revision(got.Header.Revision), At: s.now()}
	for _, kv := range got.Kvs {
		r, ok := s.decode(kv)
		if !ok {
			snap.Unreadable++
			continue
		}
		snap.Records = append(snap.Records, r)
	}
	// etcd orders by bytes, where "a-b/x" sorts before "a/x".
	slices.SortFunc(snap.Records, func(a, b noderecord.Record) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.Node, b.Node))
	})
	return snap, nil
}

// decode reads a stored record, and checks that it lives under its own
// key.
func (s *Store) decode(kv *mvccpb.KeyValue) (noderecord.Record, bool) {
	r, err := noderecord.Decode(kv.Value)
	if err != nil || s.Key(r.Key()) != string(kv.Key) {
		return noderecord.Record{}, false
	}
	return r, true
}

// keyOf parses an etcd key under a cluster's prefix.
func (s *Store) keyOf(cluster, key string) (noderecord.Key, bool) {
	rest, ok := strings.CutPrefix(key, s.clusterPrefix(cluster))
	if !ok {
		return noderecord.Key{}, false
	}
	role, node, ok := strings.Cut(rest, "/")
	return noderecord.Key{Cluster: cluster, Role: role, Node: node}, ok
}

// Watch implements noderecord.Store.
func (s *Store) Watch(ctx context.Context, cluster string, after noderecord.Revision) (noderecord.Watcher, error) {
	if err := s.begin(ctx); err != nil {
		return nil, opError("watch", err)
	}
	if err := noderecord.ValidateCluster(cluster); err != nil {
		return nil, opError("watch", err)
	}
	var from int64 = -1
	if after != "" {
		n, err := strconv.ParseInt(string(after), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("troupe: watch node records from %q: %w", after, noderecord.ErrInvalidRevision)
		}
		from = n
	}
	// A linearizable read, for the current revision, and so that an
	// unreachable backend fails here and not in the first Next.
	prefix := s.clusterPrefix(cluster)
	got, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, opError("watch", s.backendError(ctx, err))
	}
	if from > got.Header.Revision {
		return nil, fmt.Errorf("troupe: watch node records from %s: %w: the store is at %d", after, noderecord.ErrInvalidRevision, got.Header.Revision)
	}
	if from < 0 {
		from = got.Header.Revision
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(s.closing, cancel)
	w := &watcher{
		s: s, cluster: cluster, ctx: wctx,
		cancel: func() { stop(); cancel() },
		ch:     s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from+1)),
	}
	return w, nil
}

// Close implements noderecord.Store: it ends every watch and makes every
// later call return noderecord.ErrClosed. It does not close the client.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.close()
	return nil
}

func (s *Store) begin(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return noderecord.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, nil)
	}
	return nil
}

// backendError classes an etcd client error: the caller's deadline is
// ErrTimeout, a closed store ErrClosed, and anything else the backend
// did not serve is ErrUnavailable, so that callers fail closed.
func (s *Store) backendError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctxError(ctx.Err(), err)
	}
	if s.closing.Err() != nil {
		return noderecord.ErrClosed
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("%w: %w", noderecord.ErrCompacted, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w: %w", noderecord.ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", noderecord.ErrUnavailable, err)
}

func ctxError(ctxErr, err error) error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		if err != nil {
			return fmt.Errorf("%w: %w (%w)", noderecord.ErrTimeout, ctxErr, err)
		}
		return fmt.Errorf("%w: %w", noderecord.ErrTimeout, ctxErr)
	}
	return ctxErr
}

func opError(op string, err error) error {
	return fmt.Errorf("troupe: %s node record: %w", op, err)
}

func revision(r int64) noderecord.Revision { return noderecord.Revision(strconv.FormatInt(r, 10)) }

type watcher struct {
	s       *Store
	cluster string
	ctx     context.Context // the watch's own
	cancel  func()
	ch      clientv3.WatchChan

	mu      sync.Mutex // one Next at a time
	pending []noderecord.Event
	ended   error // the error that ended the watch; every later Next returns it
}

// Next implements noderecord.Watcher. Every error but ctx's ends the
// watch, and cancels etcd's.
func (w *watcher) Next(ctx context.Context) (noderecord.Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) == 0 {
		if w.ended != nil {
			return noderecord.Event{}, w.ended
		}
		if err := ctx.Err(); err != nil {
			return noderecord.Event{}, opError("watch", ctxError(err, nil))
		}
		select {
		case resp, ok := <-w.ch:
			if !ok {
				w.end(nil)
				continue
			}
			if err := resp.Err(); err != nil {
				if resp.CompactRevision != 0 {
					err = fmt.Errorf("%w (etcd compacted up to %d)", err, resp.CompactRevision)
				}
				w.end(err)
				continue
			}
			for _, ev := range resp.Events {
				if e, ok := w.event(ev); ok {
					w.pending = append(w.pending, e)
				}
			}
		case <-ctx.Done():
			return noderecord.Event{}, opError("watch", ctxError(ctx.Err(), nil))
		}
	}
	e := w.pending[0]
	w.pending = w.pending[1:]
	return e, nil
}

// end ends the watch with what ended etcd's: err, the error of its last
// response, or nil when its channel closed. Closed by the caller (Close,
// Watch's context, the store's Close), the watch ends with ErrClosed;
// otherwise etcd's watch failed: ErrCompacted when etcd compacted past
// it, ErrUnavailable for anything else (cancelled by the server, lost
// its leader, its client closed), never a silent stop.
func (w *watcher) end(err error) {
	switch {
	case w.ctx.Err() != nil:
		w.ended = fmt.Errorf("troupe: watch node records: %w: %w", noderecord.ErrClosed, w.ctx.Err())
	case errors.Is(err, rpctypes.ErrCompacted):
		w.ended = fmt.Errorf("troupe: watch node records: %w: %w", noderecord.ErrCompacted, err)
	case err != nil:
		w.ended = fmt.Errorf("troupe: watch node records: %w: etcd's watch failed: %w", noderecord.ErrUnavailable, err)
	default:
		w.ended = fmt.Errorf("troupe: watch node records: %w: etcd's watch ended", noderecord.ErrUnavailable)
	}
	w.cancel()
}

func (w *watcher) event(ev *clientv3.Event) (noderecord.Event, bool) {
	k, ok := w.s.keyOf(w.cluster, string(ev.Kv.Key))
	if !ok {
		return noderecord.Event{}, false
	}
	e := noderecord.Event{Key: k, Revision: revision(ev.Kv.ModRevision)}
	if ev.Type == clientv3.EventTypeDelete {
		e.Kind = noderecord.EventDelete
		return e, true
	}
	r, ok := w.s.decode(ev.Kv)
	if !ok {
		// A record this binary cannot read (a newer format, mid-upgrade)
		// replaced the one the watcher had: that one is gone, as a
		// Snapshot leaves it out.
		e.Kind = noderecord.EventDelete
		return e, true
	}
	e.Kind, e.Record = noderecord.EventPut, r
	return e, true
}

// Close implements noderecord.Watcher.
func (w *watcher) Close() error {
	w.cancel()
	return nil
}
