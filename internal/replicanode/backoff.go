package replicanode

import (
	"math/rand/v2"
	"time"
)

// maxBackoffDoublings caps AcquireBackoff at 64 tick periods.
const maxBackoffDoublings = 6

// AcquireBackoff returns how long to wait before retrying, for the
// attempt-th time (from 1), an acquisition that failed because another
// member acquired the key meanwhile (*StaleOwnerError) while this one
// still wants it. Two members that retry at once would keep raising the
// term over each other's prepares (dueling acquisitions); a random wait,
// uniform below a bound that doubles per attempt from one tick period up
// to 64, lets one of them finish first. It is a hint: nothing in the
// protocol depends on it.
func (n *Node) AcquireBackoff(attempt int) time.Duration {
	return backoff(n.cfg.TickEvery, attempt, rand.Int64N)
}

func backoff(tick time.Duration, attempt int, randN func(int64) int64) time.Duration {
	doublings := min(max(attempt-1, 0), maxBackoffDoublings)
	bound := int64(tick) << doublings
	return time.Duration(randN(bound) + 1)
}
