// Package proctest runs parts of a test as separate processes: the test
// binary re-executes itself in a role, so a test can kill a cluster
// member with SIGKILL, restart it at the same address, or starve it, as
// happens to real processes.
//
// # Roles
//
// A package names its roles and their bodies in TestMain, before the
// tests run:
//
//	func TestMain(m *testing.M) {
//		proctest.Roles{"member": runMember}.RunIfChild()
//		goleak.VerifyTestMain(m)
//	}
//
// In the parent RunIfChild returns at once. In a child started by Start
// it runs the role's body and exits with the code the body returns; the
// child runs no test. A body reads its parameters from the environment
// Start passed (Spec.Env), reports on stdout one line per fact, and stops
// when its stdin closes (the parent stopped it, or died).
//
// # Processes
//
// Start starts a child and returns a *Proc: the parent waits for a line
// with WaitLine (or sees every line through Spec.OnLine), kills the child
// with Kill, pauses it with Signal(SIGSTOP), stops it in order with Stop
// (closing its stdin), and reads what it wrote to stderr with Stderr, for
// failure messages. Whatever the test does, every child it started has
// exited when the test ends.
package proctest
