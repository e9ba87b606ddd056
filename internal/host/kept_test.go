package host

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/replication"
)

// pruneLog is a kind that records the prunes a ledger asks of it.
type pruneLog struct {
	Kind
	mu     sync.Mutex
	pruned map[string]int64
	done   chan string
}

func (p *pruneLog) PruneKept(key string, before int64) {
	p.mu.Lock()
	p.pruned[key] = before
	p.mu.Unlock()
	p.done <- key
}

func newPruneLog() *pruneLog {
	return &pruneLog{pruned: make(map[string]int64), done: make(chan string, 1024)}
}

// await returns the keys of the next n prunes, sorted.
func (p *pruneLog) await(t *testing.T, n int) []string {
	t.Helper()
	var keys []string
	timeout := time.After(10 * time.Second)
	for len(keys) < n {
		select {
		case k := <-p.done:
			keys = append(keys, k)
		case <-timeout:
			t.Fatalf("after 10 s, %d prunes of %d: %v", len(keys), n, keys)
		}
	}
	slices.Sort(keys)
	return keys
}

func TestALedgerPastItsBoundPrunesTheKeysHoldingTheOldestAnswers(t *testing.T) {
	p := newPruneLog()
	l := newKeptLedger(replication.KeptAnswers{MaxAnswers: 10, Retain: time.Hour}, func(string) Kind { return p })
	defer l.close()
	base := time.Now().UnixNano()
	for i, k := range []string{"a", "b", "c", "d"} {
		l.note("t", k, 2, 100, base+int64(i)) // 8 answers: within the bound
	}
	select {
	case k := <-p.done:
		t.Fatalf("a ledger within its bound pruned %s", k)
	default:
	}
	l.note("t", "e", 3, 100, base+10) // 11: over; 90% is 9
	if got := p.await(t, 1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("pruned %v, want [a], the key holding the oldest answers", got)
	}
	p.mu.Lock()
	before := p.pruned["a"]
	p.mu.Unlock()
	if before != base+1 {
		t.Fatalf("a was asked to drop answers before %d, want %d: b's oldest, the oldest kept", before-base, 1)
	}
	if n, _ := l.usage(); n != 9 {
		t.Fatalf("the ledger counts %d answers after the prune was sent, want 9 (a uncounted until it notes again)", n)
	}
}

func TestALedgerPrunesKeysWhoseOldestAnswerOutlivedItsRetention(t *testing.T) {
	p := newPruneLog()
	l := newKeptLedger(replication.KeptAnswers{Retain: 50 * time.Millisecond}, func(string) Kind { return p })
	defer l.close()
	now := time.Now().UnixNano()
	l.note("t", "old", 1, 10, now)
	l.note("t", "new", 1, 10, now+int64(time.Hour))
	if got := p.await(t, 1); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("the retention timer pruned %v, want [old]", got)
	}
	if n, _ := l.usage(); n != 1 {
		t.Fatalf("the ledger counts %d answers, want 1 (new)", n)
	}
}

func TestALedgerForgetsAKeyThatKeepsNone(t *testing.T) {
	l := newKeptLedger(replication.KeptAnswers{}, func(string) Kind { return nil })
	defer l.close()
	l.note("t", "a", 3, 300, 1)
	l.note("t", "a", 0, 0, 0)
	if n, b := l.usage(); n != 0 || b != 0 {
		t.Fatalf("after a key noted none the ledger counts %d answers and %d bytes, want none", n, b)
	}
}

func TestALedgerPastItsBytesPrunesTheOldestKeys(t *testing.T) {
	p := newPruneLog()
	l := newKeptLedger(replication.KeptAnswers{MaxBytes: 1000, Retain: time.Hour}, func(string) Kind { return p })
	defer l.close()
	base := time.Now().UnixNano()
	l.note("t", "a", 1, 400, base)
	l.note("t", "b", 1, 400, base+1)
	l.note("t", "c", 1, 400, base+2) // 1200 bytes: over; 90% is 900
	if got := p.await(t, 1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("pruned %v, want [a], the key holding the oldest answer", got)
	}
	if _, b := l.usage(); b != 800 {
		t.Fatalf("the ledger counts %d bytes after the prune was sent, want 800", b)
	}
}
