package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// TestKeyedAsksRunOnceUnderANemesis sends 1,000 keyed adds (each with an
// idempotency key of its own, retried until answered) to 4 replicated
// ledgers (250 each: most of their answers move to pages) on five member
// processes while the nemesis kills members with
// SIGKILL mid-request and restarts them, pauses one past DeadAfter and
// partitions the cluster. Each add is also sent again once answered (a
// duplicate delivery: it must get the same answer) and one in ten with
// another amount under its key (it must conflict). On the healed cluster
// every ledger must hold exactly one add per key: no add ran twice, none
// was lost, and the answers of one ledger are its sums 1 to n, each once;
// and every add sent again then gets its first answer.
func TestKeyedAsksRunOnceUnderANemesis(t *testing.T) {
	d, seed, _ := settings(t)
	lc := startLabCluster(t)
	const (
		// 250 adds per ledger: past the 128 answers a record keeps, the
		// oldest move to pages.
		ledgers   = 4
		requests  = 1000
		workers   = 8
		opTimeout = 2 * time.Second
	)
	refs := make([]actor.Ref[ledgerMsg], ledgers)
	for i := range refs {
		refs[i] = ledger.Ref(lc.c, fmt.Sprintf("ledger-%d", i))
	}
	// A key the nemesis left unacquirable comes back by RemoveAfter at the
	// latest (see TestRegistersStayLinearizableUnderANemesis).
	deadline := time.Now().Add(d + timings().RemoveAfter + 2*time.Minute)
	// ask sends q under key until it is answered, or fails the test at
	// the deadline; a conflict is an answer too.
	ask := func(key string, i int, q ledgerAdd) (int, error) {
		for {
			ctx, cancel := context.WithTimeout(actor.WithIdempotencyKey(context.Background(), key), opTimeout)
			v, err := actor.Ask(ctx, refs[i], q)
			cancel()
			if err == nil || errors.Is(err, actor.ErrIdempotencyConflict) {
				return v, err
			}
			if !actor.Temporary(err) && !errors.Is(err, context.DeadlineExceeded) {
				return 0, fmt.Errorf("%s: %w", key, err)
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%s still unanswered at the deadline: %w", key, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	answers := make([]int, requests)
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	// The adds are spread over the nemesis's run.
	pace := d / (requests / workers)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		r := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for n := range next {
				key, i := fmt.Sprintf("s%d-r%d", seed, n), n%ledgers
				v, err := ask(key, i, ledgerAdd{N: 1})
				if err != nil {
					report("add %s: %v", key, err)
					continue
				}
				answers[n] = v
				if again, err := ask(key, i, ledgerAdd{N: 1}); err != nil || again != v {
					report("add %s sent again: %d, %v; want %d, its first answer", key, again, err, v)
				}
				if r.IntN(10) == 0 {
					if _, err := ask(key, i, ledgerAdd{N: 2}); !errors.Is(err, actor.ErrIdempotencyConflict) {
						report("add %s with another amount: %v, want ErrIdempotencyConflict", key, err)
					}
				}
			}
		})
	}
	go func() {
		defer close(next)
		for n := range requests {
			next <- n
			sleepFor(pace / workers)
		}
	}()
	faults := lc.nemesis(rand.New(rand.NewPCG(seed, 0x6964656d)), d, kinds(t))
	lc.healAll()
	wg.Wait()
	t.Logf("seed %d: faults %v", seed, faults)
	for _, p := range problems {
		t.Error(p)
	}
	for i := range refs {
		var want []int
		for n := i; n < requests; n += ledgers {
			want = append(want, answers[n])
		}
		slices.Sort(want)
		sum, err := ask(fmt.Sprintf("s%d-read-%d", seed, i), i, ledgerAdd{N: 0})
		if err != nil {
			t.Fatalf("ledger %d could not be read on the healed cluster: %v", i, err)
		}
		if sum != len(want) {
			t.Errorf("ledger %d holds %d after %d keyed adds of 1: some ran twice or were lost (TROUPE_CHAOS_SEED=%d)", i, sum, len(want), seed)
		}
		for k, v := range want {
			if v != k+1 {
				t.Errorf("ledger %d's answers are %v, want each of 1..%d once (TROUPE_CHAOS_SEED=%d)", i, want, len(want), seed)
				break
			}
		}
	}
	// Every add retried on the healed cluster gets its first answer,
	// from the record or from a page.
	for n, failed := 0, 0; n < requests && failed < 10; n++ {
		key := fmt.Sprintf("s%d-r%d", seed, n)
		if v, err := ask(key, n%ledgers, ledgerAdd{N: 1}); err != nil || v != answers[n] {
			failed++
			t.Errorf("add %s retried on the healed cluster: %d, %v; want %d, its first answer (TROUPE_CHAOS_SEED=%d)", key, v, err, answers[n], seed)
		}
	}
}
