package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as a node of the remote workloads,
// which start it again with nodeEnv set.
func TestMain(m *testing.M) {
	if code, ok := nodeMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// tiny are sizes that run every workload in milliseconds; the test checks
// that the workloads work, not how fast.
var tiny = sizes{
	TellN: 2000, ManySenders: 2, ManyKeys: 8, ManyPer: 50, AskN: 200,
	Pairs: 2, PingPongM: 200, ActivateKeys: 500, ActivateQuiet: time.Millisecond,
	RemoteTellN: 2000, RemoteAskN: 100,
	ClientNodes: 2, ClientGos: 4, ClientKeys: 16, ClientAskN: 64, FailoverNodes: 3,
	ReplNodes: 3, ReplGos: 4, ReplKeys: 16, ReplN: 64,
	HandoffKeys: 64, HandoffValue: 1024, HandoffFillers: 8, HandoffAskers: 2, HandoffAskRate: 200,
	HandoffIdle: 200 * time.Millisecond, HandoffQuiet: 3 * time.Second, HandoffVia: viaJoin,
}

func TestEveryWorkloadRunsOnEverySystem(t *testing.T) {
	keys := activationKeys(tiny.ActivateKeys)
	env := &remoteEnv{}
	defer env.close()
	for _, p := range []peer{troupePeer{mailbox: troupeMailbox, rem: env}, protoPeer{rem: env}} {
		for _, w := range workloads {
			if len(runsOn(w, []peer{p})) == 0 {
				continue
			}
			t.Run(w.name+"/"+p.Name(), func(t *testing.T) {
				m, err := w.run(p, &clock{}, tiny, keys)
				if errors.Is(err, errNoHandoff) {
					// Nothing to measure until members receive state
					// when they join.
					t.Skipf("%s on %s: %v", w.name, p.Name(), err)
				}
				if err != nil {
					t.Fatalf("%s on %s failed: %v", w.name, p.Name(), err)
				}
				if m.primary <= 0 || m.cpuPerOp < 0 {
					t.Errorf("%s on %s measured %v (cpu %v ns/op), want a positive figure", w.name, p.Name(), m.primary, m.cpuPerOp)
				}
				if (strings.HasPrefix(w.name, "replicated-write") || w.name == "continuity-ask") && m.base <= 0 {
					t.Errorf("%s measured no unreplicated rate to compare with", w.name)
				}
				if strings.HasSuffix(w.name, "-metrics") && (m.base <= 0 || m.baseCPU <= 0) {
					t.Errorf("%s measured no rate (%v) or CPU (%v) with metrics off to compare with", w.name, m.base, m.baseCPU)
				}
				if w.name == "handoff-transfer" && (m.base <= 0 || m.mb <= 0 || m.idleP99 <= 0) {
					t.Errorf("%s measured %.3f MB against bulk TCP at %.1f MB/s, idle ask p99 %v; want all positive", w.name, m.mb, m.base, m.idleP99)
				}
				if w.name == "continuity-ask" && (m.replayP50 <= 0 || m.plainP50 <= 0) {
					t.Errorf("%s measured replayed p50 %v, plain p50 %v; want both positive", w.name, m.replayP50, m.plainP50)
				}
				if (w.name == "ask" || w.name == "ask-metrics" || w.name == "remote-ask" || w.name == "client-ask" || strings.HasPrefix(w.name, "replicated-write") || w.name == "continuity-ask" || w.name == "handoff-transfer") && (m.p50 <= 0 || m.p99 < m.p50) {
					t.Errorf("ask on %s: p50 %v, p99 %v; want 0 < p50 <= p99", p.Name(), m.p50, m.p99)
				}
			})
		}
	}
}

func TestTroupeTellWaitsForRoomInASmallMailbox(t *testing.T) {
	if err := (troupePeer{mailbox: 4}).Tell(&clock{}, 1000); err != nil {
		t.Fatalf("tell through a 4-message mailbox with Wait overflow failed: %v", err)
	}
}

func TestRunPrintsMediansAndARatioPerWorkload(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-rounds", "2", "-q", "-tell-n", "1000", "-many-n", "512", "-ask-n", "100",
		"-pingpong-m", "100", "-activate-keys", "300", "-activate-quiet", "1ms",
		"-remote-tell-n", "1000", "-remote-ask-n", "50",
		"-client-nodes", "2", "-client-goroutines", "4", "-client-keys", "16", "-client-ask-n", "64",
		"-repl-goroutines", "4", "-repl-keys", "16", "-repl-n", "64",
		// failover-default waits out the default detection (about 10 s):
		// TestEveryWorkloadRunsOnEverySystem runs it once.
		"-only", "tell,tell-many,ask,pingpong,activate,remote-tell,remote-ask,client-ask,replicated-write,continuity-ask,failover-fast"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "  baseline: bare TCP round trip") {
		t.Errorf("output lacks the TCP baseline of remote-ask:\n%s", out.String())
	}
	for _, w := range []string{"client-ask", "failover-fast"} {
		if !strings.Contains(out.String(), "\n"+fmt.Sprintf("%-9s %-10s ", w, "troupe")) {
			t.Errorf("output lacks the median of %s on troupe:\n%s", w, out.String())
		}
		if strings.Contains(out.String(), "\nratio "+w+" ") {
			t.Errorf("%s runs on Troupe alone but printed a ratio:\n%s", w, out.String())
		}
	}
	if !strings.Contains(out.String(), "\nratio replicated-write ") || !strings.Contains(out.String(), "replicated-write >= 25k writes/s") {
		t.Errorf("output lacks replicated-write's ratio to the unreplicated rate, or its floor:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "\nratio continuity-ask ") || !strings.Contains(out.String(), "\nratio continuity-replay-p50 ") {
		t.Errorf("output lacks continuity-ask's ratios:\n%s", out.String())
	}
	for _, w := range []string{"tell", "tell-many", "ask", "pingpong", "activate", "remote-tell", "remote-ask"} {
		if !strings.Contains(out.String(), "\nratio "+w+" ") {
			t.Errorf("output has no line %q:\n%s", "ratio "+w+" <x>", out.String())
		}
		for _, sys := range []string{"troupe", "protoactor"} {
			if !strings.Contains(out.String(), "\n"+fmt.Sprintf("%-9s %-10s ", w, sys)) {
				t.Errorf("output lacks the median of %s on %s:\n%s", w, sys, out.String())
			}
		}
	}
}

func TestOnlySelectsWorkloads(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-only", "ask", "-rounds", "1", "-q", "-ask-n", "50"}, &out, &errOut); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "ratio ask ") || strings.Contains(out.String(), "ratio tell") {
		t.Errorf("-only ask should print the ask ratio alone:\n%s", out.String())
	}
}

func TestUnknownWorkloadIsRejected(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-only", "nope"}, &out, &errOut); code != 2 {
		t.Fatalf("run -only nope exited %d, want 2; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), `unknown workload "nope"`) {
		t.Errorf("stderr should name the unknown workload, got:\n%s", errOut.String())
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100 - i) // unsorted on purpose
	}
	if got := percentile(lat, 0.50); got != 50 {
		t.Errorf("p50 of 1..100 = %d, want 50", got)
	}
	if got := percentile(lat, 0.99); got != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", got)
	}
}

func TestNodesAreGoneAfterRun(t *testing.T) {
	env := &remoteEnv{}
	if _, err := (troupePeer{rem: env}).RemoteAsk(&clock{}, 10, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := env.tcpBaseline(10); err != nil {
		t.Fatal(err)
	}
	var pids []int
	children.Lock()
	for n := range children.m {
		pids = append(pids, n.cmd.Process.Pid)
	}
	children.Unlock()
	if len(pids) != 2 {
		t.Fatalf("%d nodes running, want 2 (troupe, echo)", len(pids))
	}
	env.close()
	children.Lock()
	left := len(children.m)
	children.Unlock()
	if left != 0 {
		t.Fatalf("%d nodes still tracked after close", left)
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("node process %d still exists after close", pid)
		}
	}
}

func TestRunReportsHandoffTransferOrWhyNot(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-rounds", "1", "-q", "-only", "handoff-transfer",
		"-handoff-keys", "64", "-handoff-value", "1024", "-handoff-fillers", "8", "-handoff-askers", "2",
		"-handoff-ask-rate", "200", "-handoff-idle", "200ms", "-handoff-quiet", "3s"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, errOut.String())
	}
	measured := strings.Contains(out.String(), "\nratio handoff-transfer ") && strings.Contains(out.String(), "\nratio handoff-ask-p99 ") &&
		strings.Contains(out.String(), "\nhandoff-transfer: ")
	if !measured && !strings.Contains(out.String(), "\nhandoff-transfer: not measured: ") {
		t.Errorf("output has neither handoff-transfer's line and ratios nor why it was not measured:\n%s", out.String())
	}
}
