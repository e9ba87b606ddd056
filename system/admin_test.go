package system_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// adminOn switches on every surface of the admin listener on a free
// loopback port, with a registry of its own for the metrics.
func adminOn(cfg *system.Config) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	cfg.Admin = &system.AdminConfig{Bind: "127.0.0.1:0", Health: true, Metrics: true}
	return reg
}

// httpClient returns a client whose idle connections close when the test
// ends.
func httpClient(t *testing.T, tlsCfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// fetch sends GET url with the Authorization header auth (none if
// empty), through systemtest.Get.
func fetch(c *http.Client, url, auth string) (int, []byte, error) {
	var h http.Header
	if auth != "" {
		h = systemtest.Header("Authorization", auth)
	}
	resp, b, err := systemtest.Get(context.Background(), c, url, h)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// readyz fetches http://addr/readyz and decodes its body.
func readyz(c *http.Client, addr string) (int, system.Readiness, error) {
	var r system.Readiness
	code, b, err := fetch(c, "http://"+addr+"/readyz", "")
	if err != nil {
		return 0, r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return code, r, fmt.Errorf("readyz body %q: %w", b, err)
	}
	return code, r, nil
}

// failing returns the names of r's failing checks.
func failing(r system.Readiness) []string {
	var names []string
	for _, c := range r.Checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}

// awaitReadyz polls addr's /readyz until it answers code with exactly the
// failing checks want.
func awaitReadyz(t *testing.T, c *http.Client, addr string, code int, want ...string) system.Readiness {
	t.Helper()
	var last system.Readiness
	systemtest.Await(t, func() error {
		got, r, err := readyz(c, addr)
		if err != nil {
			return err
		}
		last = r
		if got != code || !slices.Equal(failing(r), want) || r.Ready != (code == http.StatusOK) {
			return fmt.Errorf("/readyz answered %d %+v, want %d with failing checks %v", got, r, code, want)
		}
		return nil
	})
	return last
}

// causeOf returns the cause of r's check name ("" when it passes or is
// absent).
func causeOf(r system.Readiness, name string) string {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Cause
		}
	}
	return ""
}

func checkNames(r system.Readiness) []string {
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	return names
}

func TestReadyzTurnsFromNotJoinedToReadyWhenTheMemberJoins(t *testing.T) {
	seedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	def := counterDef("acounter", nil)
	cc := cluster.FastConfig("127.0.0.1:0")
	cc.ClusterName = "test"
	cc.Seeds = []string{seedLn.Addr().String()}
	cc.JoinTimeout = systemtest.Limit
	started := make(chan error, 1)
	var joiner *system.System
	go func() {
		var err error
		joiner, err = system.Start(context.Background(), system.Config{Actors: []actor.Definition{def}, Cluster: &cc,
			Admin: &system.AdminConfig{Listener: adminLn, Health: true}})
		started <- err
	}()
	c := httpClient(t, nil)
	addr := adminLn.Addr().String()
	// The seed is not up yet: the joiner waits, its admin listener says so.
	r := awaitReadyz(t, c, addr, http.StatusServiceUnavailable, system.ReadyCheckJoined, system.ReadyCheckMajority)
	if want := []string{"joined", "majority", "not_closing"}; !slices.Equal(checkNames(r), want) {
		t.Errorf("a member without stored state lists the checks %v, want %v", checkNames(r), want)
	}
	if got := causeOf(r, system.ReadyCheckJoined); got != "not_joined" {
		t.Errorf("the joined check of a member waiting for its seed has cause %q, want %q", got, "not_joined")
	}
	if code, _, err := fetch(c, "http://"+addr+"/healthz", ""); err != nil || code != http.StatusOK {
		t.Errorf("/healthz of a joining member answered %d (%v), want 200: the process serves", code, err)
	}
	systemtest.Join(t, nil, func(cfg *system.Config) { cfg.Listener = seedLn }, def)
	if err := systemtest.Recv(t, started, "the joiner's Start"); err != nil {
		t.Fatalf("the joiner's Start: %v", err)
	}
	t.Cleanup(func() { closeNow(t, joiner) })
	if joiner.AdminAddr() != addr {
		t.Errorf("AdminAddr = %q, want the listener's %q", joiner.AdminAddr(), addr)
	}
	awaitReadyz(t, c, addr, http.StatusOK)
}

func TestReadyzTurnsUnreadyAsSoonAsAMemberCloses(t *testing.T) {
	g := newGate()
	def := actor.Define("agate", func(c *actor.Context[int, Msg], m Msg) error {
		g.pass(opOf(m))
		return nil
	}).WithMessages(Do{}, Note{})
	s := systemtest.Join(t, nil, func(cfg *system.Config) { adminOn(cfg) }, def)
	c := httpClient(t, nil)
	awaitReadyz(t, c, s.AdminAddr(), http.StatusOK)
	ref := def.Ref(s, "k")
	for i := range 2 { // one runs, blocked; one waits: Close's leave drains it
		if err := ref.Tell(systemtest.Ctx(t), Note{Op: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	systemtest.Recv(t, g.entered, "the first message")
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
		defer cancel()
		closed <- s.Close(ctx)
	}()
	r := awaitReadyz(t, c, s.AdminAddr(), http.StatusServiceUnavailable, system.ReadyCheckNotClosing)
	if last := r.Checks[len(r.Checks)-1]; last.Reason == "" || last.Cause != "closing" {
		t.Errorf("the failing check %+v gives no reason or not the cause %q", last, "closing")
	}
	close(g.open)
	if err := systemtest.Recv(t, closed, "Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, _, err := fetch(c, "http://"+s.AdminAddr()+"/healthz", ""); err == nil {
		t.Error("the admin listener still answers after Close")
	}
}

func TestReadyzIsUnreadyWhileAJoiningMemberCatchesUp(t *testing.T) {
	def := counterDef("rcounter", nil, actor.WithReplicas(3, actor.WriteMajority))
	blob := blobDef("rblob", actor.WithReplicas(3, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 3, nil, def, blob)
	waitCaughtUp(t, systems)
	for i := range 32 {
		setBlob(t, blob.Ref(systems[0], "b"+strconv.Itoa(i)), 8<<10, i)
	}
	// 256 KiB at 256 KiB/s: about a second of catching up.
	s := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) {
		adminOn(cfg)
		cfg.CatchUpRate = 256 << 10
	}, def, blob)
	c := httpClient(t, nil)
	r := awaitReadyz(t, c, s.AdminAddr(), http.StatusServiceUnavailable, system.ReadyCheckCaughtUp)
	if want := []string{"joined", "store_open", "caught_up", "majority", "not_closing"}; !slices.Equal(checkNames(r), want) {
		t.Errorf("a member with stored state lists the checks %v, want %v", checkNames(r), want)
	}
	if got := causeOf(r, system.ReadyCheckCaughtUp); got != "receiving" {
		t.Errorf("the caught_up check of a member catching up has cause %q, want %q", got, "receiving")
	}
	awaitReadyz(t, c, s.AdminAddr(), http.StatusOK)
}

func TestStandaloneReadinessChecksOnlyWhatApplies(t *testing.T) {
	plain := newStandalone(t, system.Config{}, counterDef("pcounter", nil))
	if r := plain.Readiness(); !r.Ready || !slices.Equal(checkNames(r), []string{"not_closing"}) {
		t.Errorf("a standalone system without stored state: %+v, want ready with only not_closing", r)
	}
	durable := newStandalone(t, system.Config{}, counterDef("dcounter", nil, actor.Durable()))
	if r := durable.Readiness(); !r.Ready || !slices.Equal(checkNames(r), []string{"store_open", "caught_up", "not_closing"}) {
		t.Errorf("a standalone system with a store: %+v, want ready with store_open, caught_up, not_closing", r)
	}
	closeNow(t, durable)
	if r := durable.Readiness(); r.Ready || !slices.Equal(failing(r), []string{"store_open", "not_closing"}) {
		t.Errorf("a closed standalone system: %+v, want unready, failing store_open and not_closing", r)
	}
}

func TestTheAdminTokenFailsClosedOverTLSAndIsNeverPrinted(t *testing.T) {
	const token = "admin-Token.42"
	cert, pool := selfSignedCert(t)
	logs := new(proctest.LockedBuffer) // the admin server logs too, from its own goroutines
	cfg := system.Config{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	reg := adminOn(&cfg)
	cfg.Admin.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	cfg.Admin.Token = token
	s := newStandalone(t, cfg, counterDef("tcounter", nil))
	if got := get(t, counterDef("tcounter", nil).Ref(s, "k")); got != 0 {
		t.Fatalf("count %d, want 0", got)
	}
	c := httpClient(t, &tls.Config{RootCAs: pool})
	base := "https://" + s.AdminAddr()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, auth := range []string{"", "Bearer nope", "Bearer " + token + "0"} {
			code, body, err := fetch(c, base+path, auth)
			if err != nil || code != http.StatusUnauthorized {
				t.Errorf("%s with Authorization %q: %d (%v), want 401", path, auth, code, err)
			}
			if bytes.Contains(body, []byte(token)) {
				t.Errorf("%s: the 401 body repeats the token", path)
			}
		}
		code, body, err := fetch(c, base+path, "Bearer "+token)
		if err != nil || code != http.StatusOK {
			t.Errorf("%s with the token: %d (%v), want 200", path, code, err)
		}
		if bytes.Contains(body, []byte(token)) {
			t.Errorf("%s: the body repeats the token", path)
		}
	}
	if _, _, err := fetch(httpClient(t, nil), base+"/healthz", "Bearer "+token); err == nil {
		t.Error("a client that does not trust the certificate got an answer")
	}
	dump, err := json.Marshal(cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	printed := []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", *cfg.Admin), fmt.Sprintf("%v", cfg.Admin), string(dump)}
	slog.New(slog.NewJSONHandler(logs, nil)).Info("config", "admin", *cfg.Admin)
	printed = append(printed, logs.String())
	for _, p := range printed {
		if strings.Contains(p, token) {
			t.Errorf("the token is printed: %s", p)
		}
	}
	if !strings.Contains(logs.String(), "[redacted]") {
		t.Errorf("the logged config does not say the token is redacted: %s", logs.String())
	}
	if n := series(t, reg); n == 0 {
		t.Error("nothing on the registry passed")
	}
}

func TestMetricsPassPromlintAndCountWhatTheMembersDo(t *testing.T) {
	def := counterDef("mcounter", nil, actor.WithReplicas(2, actor.WriteMajority))
	var regs []*prometheus.Registry
	systems := systemtest.StartCluster(t, 2, func(_ int, cfg *system.Config) { regs = append(regs, adminOn(cfg)) }, def)
	waitCaughtUp(t, systems)
	for i := range 20 {
		add(t, def.Ref(systems[i%2], "k"+strconv.Itoa(i)), 1)
	}
	c := httpClient(t, nil)
	for _, s := range systems {
		awaitReadyz(t, c, s.AdminAddr(), http.StatusOK)
		code, body, err := fetch(c, "http://"+s.AdminAddr()+"/metrics", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("/metrics: %d (%v)", code, err)
		}
		problems, err := promlint.New(bytes.NewReader(body)).Lint()
		if err != nil {
			t.Fatalf("promlint: %v", err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
		text := string(body)
		for _, want := range []string{
			`troupe_build_info{goversion=`, "troupe_uptime_seconds ", "troupe_ready 1", "troupe_activations ",
			"troupe_mailbox_queued_messages 0", "troupe_mailbox_deepest_messages 0", "troupe_asks_in_flight 0",
			"troupe_restarts_total 0", "troupe_rejoins_total 0", `troupe_members{status="alive"} 2`,
			`troupe_members{status="joining"} 0`, "troupe_replication_receiving_ranges 0", "troupe_replication_received_bytes_total ",
			`troupe_messages_total{kind="ask",outcome="ok",type="mcounter"} 10`, `troupe_messages_total{kind="tell",outcome="refused",type="mcounter"} 0`,
			`troupe_ask_duration_seconds_bucket{type="mcounter",le="10"} 10`, `troupe_ask_duration_seconds_count{type="mcounter"} 10`,
			`troupe_replication_writes_total{outcome="ok"} `, `troupe_replication_writes_total{outcome="failed"} 0`,
			"troupe_membership_suspicions_total 0", "troupe_membership_refutations_total 0", "troupe_membership_deaths_total 0",
			`troupe_wire_sent_frames_total{stream="membership"} `, `troupe_wire_received_bytes_total{stream="replication"} `,
			"troupe_wire_resumes_total 0", "troupe_wire_connected_peers 1", "troupe_wire_rtt_max_seconds ", "troupe_wire_pacing_rate_bytes_per_second ",
			"troupe_relay_sent_messages_total 0", "troupe_relay_silent_members 0",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: /metrics lacks %q:\n%s", s.Addr(), want, text)
			}
		}
		if strings.Contains(text, s.Addr()) || strings.Contains(text, "k1") {
			t.Errorf("%s: /metrics names an address or a key:\n%s", s.Addr(), text)
		}
	}
	if sum := activations(t, regs[0]) + activations(t, regs[1]); sum != 20 {
		t.Errorf("troupe_activations sum to %v over the members, want the 20 keys", sum)
	}
	// Each add is one write, made by the key's owner.
	ok := counterValue(t, regs[0], "troupe_replication_writes_total", "outcome", "ok") +
		counterValue(t, regs[1], "troupe_replication_writes_total", "outcome", "ok")
	if ok != 20 {
		t.Errorf("troupe_replication_writes_total{outcome=ok} sum to %v over the members, want the 20 adds", ok)
	}
	// What one member sent on a stream, the other received.
	for _, stream := range []string{"membership", "replication"} {
		sent := counterValue(t, regs[0], "troupe_wire_sent_frames_total", "stream", stream)
		if sent == 0 {
			t.Errorf("troupe_wire_sent_frames_total{stream=%q} = 0 on a member of a replicated cluster", stream)
		}
		if got := counterValue(t, regs[1], "troupe_wire_received_frames_total", "stream", stream); got == 0 {
			t.Errorf("troupe_wire_received_frames_total{stream=%q} = 0 on the other member", stream)
		}
	}
}

// activations returns the value of troupe_activations in reg.
func activations(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "troupe_activations" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no troupe_activations")
	return 0
}

func TestMetricSeriesStayFixedWithManyKeysAndPeers(t *testing.T) {
	def := counterDef("scounter", nil)
	rep := counterDef("srep", nil, actor.WithReplicas(3, actor.WriteMajority)) // replication metrics too
	// Timings that a loaded machine does not turn into false suspicions:
	// five members and six clients in one process share two cores here.
	steady := func(cfg *system.Config) { cfg.Cluster.Timings = steadyTimings() }
	first := systemtest.StartCluster(t, 1, func(_ int, cfg *system.Config) { steady(cfg) }, def, rep)
	reg := prometheus.NewRegistry()
	// One member's metrics on a registry, taken when it knows one other
	// member and nothing was sent yet; then peers come and keys are used.
	s := systemtest.Join(t, []string{first[0].Addr()}, func(cfg *system.Config) { steady(cfg); cfg.Metrics = reg }, def, rep)
	systemtest.WaitAlive(t, []*system.System{first[0], s}, 2)
	before := series(t, reg)
	systems := []*system.System{first[0], s}
	waitCaughtUp(t, systems)
	for i := range 200 { // writes of stored state
		add(t, rep.Ref(s, "rkey-"+strconv.Itoa(i)), 1)
	}
	for range 3 {
		systems = append(systems, systemtest.Join(t, []string{first[0].Addr()}, steady, def, rep))
	}
	systemtest.WaitAlive(t, systems, len(systems))
	ctx := systemtest.Ctx(t)
	// Six clients that learn the cluster from s: with the other four
	// members, s has ten peers. Each joins within a bound of its own: on
	// a loaded machine the asks of those before it may take most of one.
	for i := range 6 {
		c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{s.Addr()}})
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		for k := range 20 {
			add(t, def.Ref(c, "ckey-"+strconv.Itoa(i)+"-"+strconv.Itoa(k)), 1)
		}
	}
	const keys = 100_000
	for i := range keys {
		if err := def.Ref(systems[i%len(systems)], "key-"+strconv.Itoa(i)).Tell(ctx, DTick{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 { // asks from s of many keys
		add(t, def.Ref(s, "key-"+strconv.Itoa(i)), 1)
	}
	systemtest.WaitUntil(t, "every key active", func() bool {
		n := 0
		for _, s := range systems {
			n += s.Stats().Active
		}
		return n >= keys+120 // the stored keys may have moved away and ended since
	})
	if peers := gaugeValue(t, reg, "troupe_wire_connected_peers"); peers != 10 {
		t.Errorf("troupe_wire_connected_peers = %v, want the 4 other members and the 6 clients", peers)
	}
	if after := series(t, reg); after != before {
		t.Errorf("%d series with 1 peer and no keys, %d with 10 peers and %d keys: want the same", before, after, keys)
	}
	for _, want := range []struct {
		typ, kind string
		n         float64
		what      string
	}{{"scounter", "tell", keys / 10, "of the tells its actors took (about a fifth of the keys live on s)"},
		{"scounter", "ask", 500, "asks made through s"}, {"srep", "ask", 200, "asks made through s"}} {
		if got := messages(t, reg, want.typ, want.kind, "ok"); got < want.n {
			t.Errorf("troupe_messages_total{type=%q,kind=%q,outcome=ok} = %v, want at least %v %s", want.typ, want.kind, got, want.n, want.what)
		}
	}
}

func TestMetricsUseOnlyTheRegistryPassedAndLeaveItOnClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := system.New(system.Config{Metrics: reg, Actors: []actor.Definition{counterDef("ucounter", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if n := series(t, reg); n == 0 {
		t.Fatal("nothing registered on the registry passed")
	}
	mfs, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "troupe_") {
			t.Errorf("%s on the global default registry", mf.GetName())
		}
	}
	// One system per registry: the second is refused, and leaves nothing.
	if _, err := system.New(system.Config{Metrics: reg}); err == nil || !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("a second system on one registry: %v, want prometheus.AlreadyRegisteredError", err)
	}
	closeNow(t, s)
	if n := series(t, reg); n != 0 {
		t.Errorf("%d series left on the registry after Close, want 0", n)
	}
}

func TestAnAdminListenerThatCannotBindFailsNewAndLeavesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	reg := prometheus.NewRegistry()
	s, err := system.New(system.Config{Metrics: reg, Admin: &system.AdminConfig{Bind: taken.Addr().String(), Health: true},
		Actors: []actor.Definition{counterDef("bcounter", nil, actor.Durable())}})
	if err == nil {
		closeNow(t, s)
		t.Fatal("New succeeded with its admin address taken")
	}
	if n := series(t, reg); n != 0 {
		t.Errorf("%d series left on the registry by the failed New, want 0", n)
	}
	cc := cluster.FastConfig("127.0.0.1:0")
	cc.ClusterName = "test"
	if s, err := system.Start(systemtest.Ctx(t), system.Config{Cluster: &cc, Metrics: reg,
		Admin: &system.AdminConfig{Bind: taken.Addr().String(), Health: true}}); err == nil {
		closeNow(t, s)
		t.Fatal("Start succeeded with its admin address taken")
	}
	if n := series(t, reg); n != 0 {
		t.Errorf("%d series left on the registry by the failed Start, want 0", n)
	}
}

func TestOnlyTrustedProxiesNameTheUserAndTheTokenStaysRequired(t *testing.T) {
	const token = "proxy-Token.8"
	logs := new(proctest.LockedBuffer)
	start := func(trusted string) *system.System {
		cfg := system.Config{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		apiOn(&cfg)
		cfg.Admin.Token = token
		cfg.Admin.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(trusted)}
		cfg.Admin.ProxyUserHeader = "X-Auth-Request-User"
		cfg.Admin.RequireProxyUser = true
		return newStandalone(t, cfg, counterDef("proxied", nil))
	}
	behind := start("127.0.0.0/8") // the test's requests come from a trusted proxy
	direct := start("192.0.2.0/24")
	c := httpClient(t, nil)
	for _, tc := range []struct {
		name string
		s    *system.System
		h    http.Header
		want int
	}{
		{"token and user via a trusted proxy", behind, systemtest.Header("Authorization", "Bearer "+token, "X-Auth-Request-User", "alice",
			"X-Forwarded-For", "203.0.113.9"), http.StatusOK},
		{"user via a trusted proxy, no token", behind, systemtest.Header("X-Auth-Request-User", "alice"), http.StatusUnauthorized},
		{"token via a trusted proxy, no user", behind, systemtest.Header("Authorization", "Bearer "+token), http.StatusUnauthorized},
		{"token, user in another header", behind, systemtest.Header("Authorization", "Bearer "+token, "X-Forwarded-User", "alice"), http.StatusUnauthorized},
		{"token and user, not from a trusted proxy", direct, systemtest.Header("Authorization", "Bearer "+token, "X-Auth-Request-User", "mallory",
			"X-Forwarded-For", "198.51.100.66"), http.StatusUnauthorized},
	} {
		resp, body, err := systemtest.Get(t.Context(), c, "http://"+tc.s.AdminAddr()+"/api/v1/status", tc.h)
		if err != nil || resp.StatusCode != tc.want {
			t.Fatalf("%s: %v (%v), want %d", tc.name, resp, err, tc.want)
		}
		if resp.StatusCode == http.StatusUnauthorized && !bytes.Contains(body, []byte(`"code":"unauthorized"`)) {
			t.Errorf("%s: the 401 body %s is not the API's unauthorized error", tc.name, body)
		}
	}
	out := logs.String()
	if want := "peer.client=203.0.113.9 peer.proxy=127.0.0.1 peer.user=alice"; !strings.Contains(out, want) {
		t.Errorf("the log does not name the proxied client and user (%s):\n%s", want, out)
	}
	for _, never := range []string{token, "mallory", "198.51.100.66"} {
		if strings.Contains(out, never) {
			t.Errorf("the log holds %q, which only an untrusted peer sent or is a secret:\n%s", never, out)
		}
	}
}

func TestTheProxySettingsArePrintedAndTheTokenNever(t *testing.T) {
	const token = "dump-Token.3"
	a := system.AdminConfig{Bind: "10.0.0.1:7401", API: true, Token: token, RequireProxyUser: true, ProxyUserHeader: "X-Auth-Request-User",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "admin", a)
	dump, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a.String(), fmt.Sprintf("%#v", a), fmt.Sprintf("%+v", a), logged.String(), string(dump)} {
		if strings.Contains(p, token) || !strings.Contains(p, "[redacted]") {
			t.Errorf("the token is printed, or not marked redacted: %s", p)
		}
		if !strings.Contains(p, "10.0.0.0/8") || !strings.Contains(p, "fd00::/8") || !strings.Contains(p, "X-Auth-Request-User") {
			t.Errorf("the trusted proxies or the user header are not printed: %s", p)
		}
		if !strings.Contains(strings.ToLower(p), "require") {
			t.Errorf("RequireProxyUser is not printed: %s", p)
		}
	}
}

func TestAdminConfigValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   system.Config
		field string
	}{
		{"no surface", system.Config{Admin: &system.AdminConfig{}}, "Admin.Health"},
		{"bad bind", system.Config{Admin: &system.AdminConfig{Bind: "nocolon", Health: true}}, "Admin.Bind"},
		{"metrics without a gatherer", system.Config{Admin: &system.AdminConfig{Metrics: true}}, "Admin.Gatherer"},
		{"metrics on a registerer only", system.Config{Metrics: prometheus.WrapRegistererWithPrefix("x_", prometheus.NewRegistry()),
			Admin: &system.AdminConfig{Metrics: true}}, "Admin.Gatherer"},
		{"TLS without a certificate", system.Config{Admin: &system.AdminConfig{Health: true, TLS: &tls.Config{}}}, "Admin.TLS"},
		{"token with a space", system.Config{Admin: &system.AdminConfig{Health: true, Token: "two words"}}, "Admin.Token"},
		{"a zero network", system.Config{Admin: &system.AdminConfig{Health: true, TrustedProxies: []netip.Prefix{{}}}}, "Admin.TrustedProxies"},
		{"a host for a network", system.Config{Admin: &system.AdminConfig{Health: true,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/8")}}}, "Admin.TrustedProxies"},
		{"a user header without a proxy", system.Config{Admin: &system.AdminConfig{Health: true, ProxyUserHeader: "X-User"}}, "Admin.ProxyUserHeader"},
		{"the token's header for the user", system.Config{Admin: &system.AdminConfig{Health: true, ProxyUserHeader: "Authorization",
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}, "Admin.ProxyUserHeader"},
		{"a user header with a space", system.Config{Admin: &system.AdminConfig{Health: true, ProxyUserHeader: "X User",
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}, "Admin.ProxyUserHeader"},
		{"a user required, no proxy", system.Config{Admin: &system.AdminConfig{Health: true, RequireProxyUser: true}}, "Admin.RequireProxyUser"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, system.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), tc.field) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig naming %s", tc.name, err, tc.field)
		}
		if strings.Contains(fmt.Sprint(err), "two words") {
			t.Errorf("%s: the error repeats the token: %v", tc.name, err)
		}
	}
	if err := (system.Config{Admin: &system.AdminConfig{}}).Validate(); !strings.Contains(fmt.Sprint(err), "API") {
		t.Errorf("Validate() of an admin config serving nothing = %v, want it to name API among the surfaces", err)
	}
	ok := system.Config{Metrics: prometheus.NewRegistry(), Admin: &system.AdminConfig{Metrics: true, Health: true}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() of a registry serving /metrics = %v, want nil", err)
	}
}

// selfSignedCert returns a certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "troupe admin test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
