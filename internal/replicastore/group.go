package replicastore

import (
	"sync"

	"github.com/troupe-go/troupe/internal/replica"
)

// groupCommit writes the Puts that wait at one moment as one transaction.
// Badger syncs once per transaction when SyncWrites is on, but once for
// each transaction even when its writer batches several, so sharing an
// fsync among concurrent writers has to happen above it. No goroutine:
// the first caller to find nobody writing becomes the leader and writes
// batch after batch until the queue is empty; the others wait for their
// batch's result.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*pendingPut
	leading bool
}

type pendingPut struct {
	recs []replica.Record
	done chan error
}

func (g *groupCommit) commit(recs []replica.Record, write func([]replica.Record) error) error {
	p := &pendingPut{recs: recs, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.leading {
		g.mu.Unlock()
		return <-p.done
	}
	g.leading = true
	for len(g.queue) > 0 {
		batch := g.queue
		g.queue = nil
		g.mu.Unlock()
		writeBatch(batch, write)
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	return <-p.done
}

// writeBatch writes every pending Put in one write, in queue order (a
// later Put of the same record wins); they all get its result.
func writeBatch(batch []*pendingPut, write func([]replica.Record) error) {
	var all []replica.Record
	for _, p := range batch {
		all = append(all, p.recs...)
	}
	err := write(all)
	for _, p := range batch {
		p.done <- err
	}
}
