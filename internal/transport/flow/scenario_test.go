package flow

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scenario scripts drive a Scheduler with commands and compare the
// transcript with a golden file: testdata/<name>.txt is the script,
// testdata/<name>.golden the expected transcript. Run with
// TROUPE_UPDATE_GOLDEN=1 to rewrite the golden files after a deliberate
// change, and read the diff.
//
// Commands (one per line, # starts a comment):
//
//	config window=N maxframe=N      a fresh scheduler (must come first)
//	enqueue STREAM KEY SIZE NAME    queue an envelope; streams: control,
//	                                membership, app, repl
//	cancel NAME                     cancel it and print the result
//	next [N]                        write up to N frames (default 1),
//	                                waiting out pacing; stop when blocked
//	drain                           decide until nothing is pending, waiting
//	                                out pacing and granting all when blocked
//	grant STREAM CONSUMED [WINDOW]  apply a grant
//	advance DURATION                move virtual time
//	credit                          print each stream's available credit
func TestSchedulerScenarios(t *testing.T) {
	scripts, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scenario scripts in testdata (%v)", err)
	}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			got := runScenario(t, path)
			golden := strings.TrimSuffix(path, ".txt") + ".golden"
			if os.Getenv("TROUPE_UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with TROUPE_UPDATE_GOLDEN=1 to create it)", err)
			}
			if got != string(want) {
				t.Errorf("transcript differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

var scenarioStreamNames = [...]string{"control", "membership", "app", "repl"}

func scenarioStream(name string) (StreamID, bool) {
	for i, n := range scenarioStreamNames {
		if n == name {
			return []StreamID{stControl, stMembership, stApp, stRepl}[i], true
		}
	}
	return 0, false
}

func streamName(id StreamID) string {
	for _, n := range scenarioStreamNames {
		if s, _ := scenarioStream(n); s == id {
			return n
		}
	}
	return fmt.Sprint(id)
}

type scenario struct {
	t     *testing.T
	s     *Scheduler
	now   time.Time
	names map[Handle]string
	byKey map[string]Handle
	out   strings.Builder
}

func runScenario(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := &scenario{t: t, now: t0, names: map[Handle]string{}, byKey: map[string]Handle{}}
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			sc.out.WriteString(lines.Text() + "\n")
			continue
		}
		sc.out.WriteString("> " + line + "\n")
		if err := sc.run(strings.Fields(line)); err != nil {
			t.Fatalf("%s:%d: %s: %v", path, n, line, err)
		}
	}
	return sc.out.String()
}

func (sc *scenario) printf(format string, args ...any) {
	fmt.Fprintf(&sc.out, "  "+format+"\n", args...)
}

func (sc *scenario) run(args []string) error {
	if sc.s == nil && args[0] != "config" {
		return fmt.Errorf("config must come first")
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			sc.t.Fatalf("not a number: %q", s)
		}
		return n
	}
	stream := func(s string) StreamID {
		id, ok := scenarioStream(s)
		if !ok {
			sc.t.Fatalf("unknown stream %q", s)
		}
		return id
	}
	switch args[0] {
	case "config":
		cfg := testConfig(1 << 20)
		for _, kv := range args[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "window":
				for i := range cfg.Streams {
					cfg.Streams[i].Window = int64(atoi(v))
					cfg.Streams[i].MaxWindow = int64(atoi(v))
				}
			case "maxframe":
				cfg.MaxFrame = atoi(v)
			default:
				return fmt.Errorf("unknown setting %q", k)
			}
		}
		s, err := NewScheduler(cfg)
		sc.s = s
		return err
	case "enqueue":
		h, err := sc.s.EnqueueSize(stream(args[1]), uint64(atoi(args[2])), atoi(args[3]))
		sc.names[h], sc.byKey[args[4]] = args[4], h
		return err
	case "cancel":
		sc.printf("%v", sc.s.Cancel(sc.byKey[args[1]]))
	case "next":
		n := 1
		if len(args) > 1 {
			n = atoi(args[1])
		}
		for written := 0; written < n; {
			f, wait, ok := sc.s.Next(sc.now)
			switch {
			case ok:
				sc.frame(f)
				written++
			case wait > 0:
				// Rounded: the golden files must not depend on how a
				// platform rounds floating point.
				sc.printf("paced for %v", wait.Round(time.Microsecond))
				sc.now = sc.now.Add(wait)
			default:
				sc.printf("blocked")
				return nil
			}
		}
	case "drain":
		for i := 0; sc.s.Pending() > 0; i++ {
			if i > 10_000 {
				return fmt.Errorf("did not drain")
			}
			f, wait, ok := sc.s.Next(sc.now)
			switch {
			case ok:
				sc.frame(f)
			case wait > 0:
				sc.now = sc.now.Add(wait)
			default:
				grantAll(sc.t, sc.s, sc.now)
			}
		}
	case "grant":
		id := stream(args[1])
		g := Grant{Consumed: int64(atoi(args[2])), Window: sc.s.Credit(id).Window()}
		if len(args) > 3 {
			g.Window = int64(atoi(args[3]))
		}
		if err := sc.s.ApplyGrant(id, g, sc.now); err != nil {
			sc.printf("error: %v", err)
		}
	case "advance":
		d, err := time.ParseDuration(args[1])
		sc.now = sc.now.Add(d)
		return err
	case "credit":
		for _, name := range scenarioStreamNames {
			id, _ := scenarioStream(name)
			c := sc.s.Credit(id)
			sc.printf("%s: available %d of %d (sent %d, consumed %d)", name, c.Available(), c.Window(), c.Sent(), c.Consumed())
		}
	default:
		return fmt.Errorf("unknown command")
	}
	return nil
}

func (sc *scenario) frame(f Frame) {
	if f.Kind == FrameAbort {
		sc.printf("abort %s#%d %s at %d", streamName(f.Stream), f.Envelope, sc.names[f.Handle], f.StreamOffset)
		return
	}
	flags := ""
	if f.First {
		flags += " first"
	}
	if f.Last {
		flags += " last"
	}
	sc.printf("data %s#%d %s [%d,%d)%s at %d", streamName(f.Stream), f.Envelope, sc.names[f.Handle], f.Offset, f.Offset+f.Len, flags, f.StreamOffset)
}
