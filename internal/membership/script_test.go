package membership

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden transcripts in testdata/scripts")

// TestScripts runs the scenario scripts in testdata/scripts/*.txt and
// compares their transcripts with the .golden files beside them (go test
// -run TestScripts -update rewrites them). A script is a list of commands,
// one a line, '#' for comments:
//
//	seed N                 seed of the network and the cores (before start)
//	start N                start nodes n0..n(N-1) through n0; wait for a full view
//	run D                  run D of virtual time; report what changed
//	kill I | restart I     stop node I / start a new process at its address
//	restart-alone I        restart node I without seeds (a new cluster of its own)
//	pause I | resume I     stop / resume node I's loop and inbox
//	partition 0 1 | 2 3 4  split the nodes into groups
//	heal                   remove the partition
//	views                  print every live node's view and standing
//
// "run" reports, per subject and status, which nodes reported the change
// and when the first did, and every change of standing: a readable trace
// of the protocol that any behaviour change shows up in. Times are virtual,
// from the start of the script, as each node's clock read at its last tick
// (nodes tick every 25 ms), so a report can precede its cause by a tick.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/scripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("expected scripts in testdata/scripts; got %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			got := runScript(t, f)
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run with -update to create it): %v", golden, err)
			}
			if got != string(want) {
				t.Fatalf("expected the transcript in %s; got:\n%s", golden, got)
			}
		})
	}
}

type scriptRun struct {
	t      *testing.T
	s      *sim
	seed   uint64
	addrs  []string
	out    strings.Builder
	origin time.Time
	seen   map[string]int // events already reported, per node
}

func runScript(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &scriptRun{t: t, seen: make(map[string]int)}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			r.out.WriteString(line + "\n")
			continue
		}
		r.out.WriteString("> " + line + "\n")
		r.exec(strings.Fields(line))
	}
	return r.out.String()
}

func (r *scriptRun) printf(format string, args ...any) {
	fmt.Fprintf(&r.out, "  "+format+"\n", args...)
}

func (r *scriptRun) node(arg string) string {
	i, err := strconv.Atoi(arg)
	if err != nil || i < 0 || i >= len(r.addrs) {
		r.t.Fatalf("bad node %q", arg)
	}
	return r.addrs[i]
}

func (r *scriptRun) name(addr string) string {
	return "n" + strconv.Itoa(slices.Index(r.addrs, addr))
}

func (r *scriptRun) exec(f []string) {
	switch f[0] {
	case "seed":
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			r.t.Fatal(err)
		}
		r.seed = v
	case "start":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			r.t.Fatal(err)
		}
		r.s = newSim(r.t, simOptions{seed: r.seed, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
		r.origin = r.s.net.Now()
		r.addrs = r.s.cluster(n)
		r.printf("%d nodes see each other alive at %v", n, r.s.net.Now().Sub(r.origin))
		r.skipEvents()
	case "run":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			r.t.Fatal(err)
		}
		r.s.run(d)
		r.report()
	case "kill":
		r.s.kill(r.node(f[1]))
	case "restart":
		a := r.node(f[1])
		r.s.kill(a)
		r.s.start(a, r.addrs[0], r.addrs[1])
		r.seen[a] = 0
	case "restart-alone":
		a := r.node(f[1])
		r.s.kill(a)
		r.s.start(a)
		r.seen[a] = 0
	case "pause":
		r.s.pause(r.node(f[1]))
	case "resume":
		r.s.resume(r.node(f[1]))
	case "partition":
		var groups [][]string
		var g []string
		for _, x := range f[1:] {
			if x == "|" {
				groups, g = append(groups, g), nil
				continue
			}
			g = append(g, r.node(x))
		}
		r.s.net.Partition(append(groups, g)...)
	case "heal":
		r.s.net.Heal()
	case "views":
		for _, a := range r.addrs {
			n := r.s.nodes[a]
			if n.down {
				r.printf("%s: down", r.name(a))
				continue
			}
			var parts []string
			for _, m := range n.core.Members() {
				parts = append(parts, fmt.Sprintf("%s#%d@%d=%s", r.name(m.ID.Addr), m.ID.Incarnation, m.Incarnation, m.Status))
			}
			r.printf("%s: owning=%v healthy=%v %s", r.name(a), n.core.Owning(), n.core.Healthy(), strings.Join(parts, " "))
		}
	default:
		r.t.Fatalf("unknown command %q", f[0])
	}
}

func (r *scriptRun) skipEvents() {
	for _, a := range r.addrs {
		r.seen[a] = len(r.s.nodes[a].events)
	}
}

// report prints what changed since the last report, grouped.
func (r *scriptRun) report() {
	type key struct {
		subject string
		status  Status
	}
	first := make(map[key]time.Duration)
	observers := make(map[key][]string)
	var order []key
	var standing []string
	for _, a := range r.addrs {
		n := r.s.nodes[a]
		for _, e := range n.events[r.seen[a]:] {
			at := e.At.Sub(r.origin)
			switch e.Kind {
			case EventMemberUpdated:
				if e.Member.ID.Addr == a {
					continue // own announcements show as refutations
				}
				k := key{fmt.Sprintf("%s#%d", r.name(e.Member.ID.Addr), e.Member.ID.Incarnation), e.Member.Status}
				if _, ok := first[k]; !ok {
					order = append(order, k)
					first[k] = at
				}
				first[k] = min(first[k], at)
				if !slices.Contains(observers[k], r.name(a)) {
					observers[k] = append(observers[k], r.name(a))
				}
			case EventStanding:
				verb := "steps down"
				if e.Owning {
					verb = "owns again"
				}
				standing = append(standing, fmt.Sprintf("%s %s at %v", r.name(a), verb, at))
			case EventRefuted:
				standing = append(standing, fmt.Sprintf("%s refutes at %v (now @%d)", r.name(a), at, e.Member.Incarnation))
			case EventRemoved:
				standing = append(standing, fmt.Sprintf("%s learns it was removed at %v", r.name(a), at))
			}
		}
		r.seen[a] = len(n.events)
	}
	slices.SortStableFunc(order, func(x, y key) int { return int(first[x] - first[y]) })
	for _, k := range order {
		obs := observers[k]
		slices.Sort(obs)
		r.printf("%s %s: first at %v, reported by %s", k.subject, k.status, first[k], strings.Join(obs, " "))
	}
	for _, s := range standing {
		r.printf("%s", s)
	}
	if len(order) == 0 && len(standing) == 0 {
		r.printf("no change")
	}
}
