package system_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/memrecords"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The browser tests open a member's UI in headless Chromium and read
// the page as an operator would: by what its elements show.

// chromium returns the path of a Chromium binary. Without one the test
// skips, unless TROUPE_REQUIRE_BROWSER is set (.ci/run sets it once it
// installed chromium): there a missing browser is a broken setup.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TROUPE_REQUIRE_BROWSER") == "" {
		t.Skip("no chromium on PATH: the UI's browser tests skip (apt-get install chromium, as .ci/run does, to run them)")
	}
	t.Fatal("no chromium on PATH, and TROUPE_REQUIRE_BROWSER is set: .ci/run installs it (apt-get install chromium)")
	return ""
}

// pageWatch runs in the page before its own script and records what
// must never happen: a script error, a promise nobody handles, a
// violation of the page's content security policy.
const pageWatch = `window.__problems = [];
addEventListener("error", (e) => __problems.push("error: " + e.message));
addEventListener("unhandledrejection", (e) => __problems.push("unhandled rejection: " + e.reason));
document.addEventListener("securitypolicyviolation", (e) => __problems.push("CSP: " + e.violatedDirective + " " + e.blockedURI));`

// openUI opens the UI of s in a new headless Chromium, the binary at
// exe, sending token as a bearer token if not empty, and closes the
// browser, its process ended, when the test ends.
func openUI(t *testing.T, exe string, s *system.System, token string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // we may run as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		ctx, c := context.WithTimeout(tab, systemtest.Limit)
		defer c()
		if err := chromedp.Cancel(ctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancel()
		acancel() // waits for the browser's process to end
	})
	// The first action starts the browser, which lives as long as the
	// context of that action: tab itself, never one with a deadline.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, c := context.WithTimeout(tab, systemtest.Limit)
	defer c()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pageWatch}); err != nil {
		t.Fatal(err)
	}
	if token != "" {
		// A navigation cannot carry a header of the page's choosing: the
		// browser adds it to every request, as an authenticating proxy
		// in front of the listener would.
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+s.AdminAddr()+"/")); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	return tab
}

// js renders v as a JavaScript literal.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// pageText returns the text the page shows, for failure messages.
func pageText(tab context.Context) string {
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return fmt.Sprintf("(the page's text cannot be read: %v)", err)
	}
	return text
}

// waitPage polls the page until the JavaScript expression cond holds,
// failing the test after systemtest.Limit with what the page shows.
func waitPage(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, systemtest.Limit+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(systemtest.Limit))); err != nil {
		t.Fatalf("the page did not show %s within %v (%v); it shows:\n%s", what, systemtest.Limit, err, pageText(tab))
	}
}

// evaluate returns the value of the JavaScript expression in the page.
func evaluate[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, systemtest.Limit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// noPageProblems fails the test if the page had a script error or a
// policy violation.
func noPageProblems(t *testing.T, tab context.Context) {
	t.Helper()
	if ps := evaluate[[]string](t, tab, `window.__problems`); len(ps) > 0 {
		t.Errorf("the page had problems: %q", ps)
	}
}

// memberShown is the condition that the members table shows addr with
// status, as the row's text and its data-status.
func memberShown(addr, status string) string {
	return fmt.Sprintf(`(() => {
		const r = document.querySelector('#members-body tr[data-member=' + CSS.escape(%s) + ']');
		return r !== null && r.dataset.status === %s && r.querySelector('[data-field="status"]').textContent === %s;
	})()`, js(addr), js(status), js(status))
}

// membersShown is the condition that the table lists exactly want, each
// with its status.
func membersShown(want map[string]string) string {
	return fmt.Sprintf(`(() => {
		const want = %s;
		const rows = [...document.querySelectorAll('#members-body tr[data-member]')];
		return rows.length === Object.keys(want).length && rows.every((r) =>
			want[r.dataset.member] === r.dataset.status && r.querySelector('[data-field="status"]').textContent === r.dataset.status);
	})()`, js(want))
}

// recordShown is the condition that the records table shows node's
// record with the health, as its data-health and its health cell's text.
func recordShown(node, health string) string {
	return fmt.Sprintf(`(() => {
		const r = document.querySelector('#records-body tr[data-record=' + CSS.escape(%s) + ']');
		return r !== null && r.dataset.health === %s && r.querySelector('[data-field="health"]').textContent.startsWith(%s);
	})()`, js(node), js(health), js(health))
}

// ownRecordShown is the condition that the records table shows s's own
// record, published by s: healthy, ready, its labels, a heartbeat age
// in seconds, its counters as numbers and its version.
func ownRecordShown(s *system.System, labels string) string {
	return fmt.Sprintf(`(() => {
		const r = document.querySelector('#records-body tr[data-record=' + CSS.escape(%s) + ']');
		if (r === null) return false;
		const f = (name) => r.querySelector('[data-field="' + name + '"]').textContent;
		return r.dataset.self !== undefined && r.dataset.source === "published" && r.dataset.role === "member" &&
			f("health") === "healthy" && f("ready") === "ready" && f("labels") === %s &&
			/^\d+\.\d s$/.test(f("age")) && ["messages", "errors", "activations", "bytes"].every((c) => /^\d+$/.test(f(c))) &&
			f("version") !== "–";
	})()`, js(s.Addr()), js(labels))
}

func TestTheUIShowsAKilledMemberSuspectThenDeadInABrowser(t *testing.T) {
	exe := chromium(t)
	const token = "ui-browser-Token.1"
	var victim systemtest.Net
	def := counterDef("uikill", nil)
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		// A suspicion lasts several refreshes of the page (one a second),
		// and the dead stay listed until the test has seen them.
		cfg.Cluster.Timings.DeadAfter = 3 * time.Second
		cfg.Cluster.Timings.RemoveAfter = time.Minute
		cfg.RecordTimings = fastRecords
		if i == 0 {
			uiOn(cfg)
			cfg.Admin.Token = token
			cfg.RecordLabels = map[string]string{"zone": "a", "host": "h0"}
		}
		if i == 2 {
			victim.Attach(t, cfg)
		}
	}, def)
	tab := openUI(t, exe, systems[0], token)
	all := map[string]string{}
	for _, s := range systems {
		all[s.Addr()] = "alive"
	}
	waitPage(t, tab, "three members alive", membersShown(all))
	waitPage(t, tab, "this member's own record with its fields", ownRecordShown(systems[0], "host=h0, zone=a"))
	for _, s := range systems[1:] {
		waitPage(t, tab, s.Addr()+"'s record, healthy, derived from the view", recordShown(s.Addr(), "healthy")+fmt.Sprintf(
			` && document.querySelector('#records-body tr[data-record=' + CSS.escape(%s) + ']').dataset.source === "membership"`, js(s.Addr())))
	}
	waitPage(t, tab, "this member marked as itself", fmt.Sprintf(
		`document.querySelector('#members-body tr[data-self]')?.dataset.member === %s`, js(systems[0].Addr())))
	waitPage(t, tab, "the ring of "+def.Name()+" shared by the three members", fmt.Sprintf(`(() => {
		const arcs = [...document.querySelectorAll('figure[data-ring-type=%s] path[data-member]')];
		const sum = arcs.reduce((s, a) => s + Number(a.dataset.share), 0);
		return arcs.length === 3 && Math.abs(sum - 1) < 1e-9;
	})()`, js(def.Name())))

	killed := systems[2].Addr()
	systemtest.Crash(systems[2], &victim)
	waitPage(t, tab, killed+" suspect", memberShown(killed, "suspect"))
	waitPage(t, tab, killed+" dead", memberShown(killed, "dead"))
	waitPage(t, tab, killed+"'s record unhealthy", recordShown(killed, "unhealthy"))
	all[killed] = "dead"
	waitPage(t, tab, "the two others still alive", membersShown(all))
	noPageProblems(t, tab)
}

func TestTheUILooksUpAKeysOwnerAndExplainsARefusalInABrowser(t *testing.T) {
	exe := chromium(t)
	everywhere := counterDef("uiwhere", nil)
	elsewhere := counterDef("uielsewhere", nil)
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		if i == 0 {
			uiOn(cfg) // it hosts everywhere only
			return
		}
		cfg.Actors = []actor.Definition{everywhere, elsewhere}
	}, everywhere)
	tab := openUI(t, exe, systems[0], "")
	const key = "ada"
	owner, code := whereOwner(t, httpClient(t, nil), systems[0], everywhere.Name(), key)
	if owner == "" {
		t.Fatalf("the API names no owner of %s/%s (error %q)", everywhere.Name(), key, code)
	}
	lookUp(t, tab, everywhere.Name(), key)
	waitPage(t, tab, "the owner of "+key+", "+owner, fmt.Sprintf(`(() => {
		const r = document.getElementById("where-result");
		return r.dataset.state === "ok" && document.getElementById("where-owner")?.textContent === %s;
	})()`, js(owner)))

	// systems[0] does not host elsewhere: it cannot say how that type
	// places its keys, and the page says so, naming the hosts.
	lookUp(t, tab, elsewhere.Name(), key)
	waitPage(t, tab, "the refusal explained with the hosts", fmt.Sprintf(`(() => {
		const r = document.getElementById("where-result");
		const text = r.textContent;
		return r.dataset.state === "error" && r.dataset.code === "type_not_hosted_here" &&
			text.includes("does not host") && text.includes(%s) && text.includes(%s);
	})()`, js(systems[1].Addr()), js(systems[2].Addr())))
	noPageProblems(t, tab)
}

// lookUp fills the page's lookup form with typ and key and submits it.
func lookUp(t *testing.T, tab context.Context, typ, key string) {
	t.Helper()
	waitPage(t, tab, "type "+typ+" offered for lookup", fmt.Sprintf(
		`[...document.querySelectorAll('#where-type option')].some((o) => o.value === %s)`, js(typ)))
	ctx, cancel := context.WithTimeout(tab, systemtest.Limit)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#where-type"), typ),
		chromedp.SetValue(chromedp.CSS("#where-key"), key),
		chromedp.Click(chromedp.CSS("#where-submit")),
	); err != nil {
		t.Fatalf("look up %s/%s: %v", typ, key, err)
	}
}

func TestTheUIMarksItsLastDataStaleWhenItsMemberStopsAnsweringInABrowser(t *testing.T) {
	exe := chromium(t)
	store := memrecords.New(memrecords.Config{})
	t.Cleanup(func() { store.Close() }) // after the member
	s := systemtest.Join(t, nil, func(cfg *system.Config) {
		uiOn(cfg)
		cfg.Records = store
		cfg.RecordTimings = fastRecords
	}, counterDef("uistale", nil))
	systemtest.WaitAlive(t, []*system.System{s}, 1)
	opened := time.Now()
	tab := openUI(t, exe, s, "")
	waitPage(t, tab, "the member alive and the data fresh", memberShown(s.Addr(), "alive")+
		` && document.getElementById("freshness").dataset.state === "fresh"`)
	waitPage(t, tab, "its record healthy and the records fresh", recordShown(s.Addr(), "healthy")+
		` && document.getElementById("records-freshness").dataset.state === "fresh"`)

	// The record store fails: the records go stale, kept on the page,
	// while the rest of the page, which does not read them, stays fresh.
	store.SetUnavailable(errors.New("down for the test"))
	waitPage(t, tab, "the records marked stale", `document.getElementById("records-freshness").dataset.state === "stale" &&
		document.getElementById("records-section").dataset.stale === "true"`)
	if text := evaluate[string](t, tab, `document.getElementById("records-freshness").textContent`); !regexp.MustCompile(
		`^Records stale since \d\d:\d\d:\d\d: .*unavailable`).MatchString(text) {
		t.Errorf("the records' freshness line says %q, want \"Records stale since HH:MM:SS\" and the store unavailable", text)
	}
	if !evaluate[bool](t, tab, recordShown(s.Addr(), "healthy")+` && document.getElementById("freshness").dataset.state === "fresh"`) {
		t.Errorf("with the record store down, the page no longer shows the last record, or the rest is not fresh; it shows:\n%s", pageText(tab))
	}
	store.SetUnavailable(nil)
	waitPage(t, tab, "the records fresh again", `document.getElementById("records-freshness").dataset.state === "fresh" &&
		document.getElementById("records-section").dataset.stale === "false"`)

	closeNow(t, s) // its admin listener goes with it: every refresh fails from now on
	closed := time.Now()
	waitPage(t, tab, "the data marked stale", `document.getElementById("freshness").dataset.state === "stale"`)
	text := evaluate[string](t, tab, `document.getElementById("freshness").textContent`)
	if !regexp.MustCompile(`^Stale since \d\d:\d\d:\d\d\b`).MatchString(text) {
		t.Errorf("the freshness line says %q, want it to start with \"Stale since HH:MM:SS\"", text)
	}
	since, err := time.Parse(time.RFC3339Nano, evaluate[string](t, tab, `document.getElementById("freshness").dataset.since`))
	if err != nil || since.Before(opened.Add(-time.Second)) || since.After(closed.Add(time.Second)) {
		t.Errorf("stale since %v (%v), want the time of the last good data, between the page's opening %v and the close %v",
			since, err, opened, closed)
	}
	// The browser and the test share the machine's time zone.
	if clock := since.Local().Format("15:04:05"); !strings.HasPrefix(text, "Stale since "+clock) {
		t.Errorf("the freshness line says %q, want \"Stale since %s\", the time of the last good data", text, clock)
	}
	// The last data stays on the page.
	if !evaluate[bool](t, tab, memberShown(s.Addr(), "alive")) {
		t.Errorf("the stale page no longer shows the member alive; it shows:\n%s", pageText(tab))
	}
	noPageProblems(t, tab)
}
