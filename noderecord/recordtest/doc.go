// Package recordtest is the contract suite every noderecord.Store
// backend passes: the ordering rule under retries, restarts and
// concurrent writers, leases, removal, snapshots at one revision,
// watches that resume, recover from compaction and end with an error
// when the backend's own watch fails, and the errors for timeouts and an
// unavailable backend.
//
// A backend's test calls Run with a function that returns a fresh
// Harness for each subtest:
//
//	func TestContract(t *testing.T) {
//		recordtest.Run(t, func(t *testing.T) recordtest.Harness {
//			s := mybackend.New(...)
//			t.Cleanup(func() { s.Close() })
//			return recordtest.Harness{Store: s, Compact: ..., Unavailable: ..., BreakWatches: ...}
//		})
//	}
//
// Each subtest uses a cluster id of its own, so several may share one
// backend (one etcd server, say). A backend on a fake clock sets
// Harness.Advance and the lease tests run in no time; one on real time
// leaves it nil and they wait for leases of Harness.ShortTTL to lapse.
package recordtest
