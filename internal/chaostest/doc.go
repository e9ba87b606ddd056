// Package chaostest holds the tests of a whole Troupe cluster under
// faults: member processes in network namespaces (internal/netns), each
// with its own data directory, killed with SIGKILL and restarted,
// paused with SIGSTOP past the failure detector's DeadAfter, and cut
// apart by partitions, while clients run operations whose history
// porcupine checks for linearizability. The package has no code outside
// its tests.
//
// The tests need root, ip and nft (netns.New skips otherwise, and fails
// under CI). TROUPE_CHAOS_DURATION sets how long the nemesis runs (default
// a short run), TROUPE_CHAOS_SEED replays a run, TROUPE_CHAOS_TRIALS runs
// several trials in a row (for figures), TROUPE_CHAOS_FAULTS narrows the
// nemesis to some kinds of fault (kill, pause, partition), and with
// powerloss its kills are power losses (the store's boot record removed
// before the restart, so the member restarts receiving the whole ring).
package chaostest
