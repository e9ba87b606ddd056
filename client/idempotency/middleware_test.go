package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client/idempotency"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// payments is a handler that counts its runs and answers 201 with a body
// naming the run.
type payments struct {
	runs atomic.Int64
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "payment %d of %s (request %s)", n, body, idempotency.RequestID(r.Context()))
}

func newMiddleware(t *testing.T, cfg idempotency.Config, h http.Handler) http.Handler {
	t.Helper()
	if cfg.Store == nil {
		st, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store = st
	}
	mw, err := idempotency.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mw(h)
}

func do(h http.Handler, method, target, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.Header, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// wantError checks an error answer: status, JSON code, and the request id
// in both the header and the body.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d (body %q)", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", w.Body, err)
	}
	if e.Error.Code != code {
		t.Fatalf("error code %q, want %q (message %q)", e.Error.Code, code, e.Error.Message)
	}
	id := w.Header().Get(idempotency.DefaultRequestIDHeader)
	if id == "" || e.Error.RequestID != id {
		t.Fatalf("request id %q in the body, %q in the header: want both, equal", e.Error.RequestID, id)
	}
}

func TestAGuardedRequestWithoutAKeyIsRefusedAndDoesNotRun(t *testing.T) {
	p := &payments{}
	h := newMiddleware(t, idempotency.Config{}, p)
	wantError(t, do(h, http.MethodPost, "/payments", "", "10 EUR"), http.StatusBadRequest, "idempotency_key_missing")
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Add(idempotency.Header, "a")
	r.Header.Add(idempotency.Header, "b")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	wantError(t, w, http.StatusBadRequest, "idempotency_key_invalid")
	if n := p.runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times for requests without a usable key", n)
	}
}

func TestMalformedKeysAreRefusedAndDoNotRun(t *testing.T) {
	p := &payments{}
	h := newMiddleware(t, idempotency.Config{}, p)
	for _, key := range []string{
		`""`,
		strings.Repeat("k", idempotency.MaxKeyLen+1),
		"tab\there",
		"caf\u00e9",
		"with space",
		`"bad \n escape"`,
		`"unescaped " quote"`,
	} {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader("x"))
		r.Header.Set(idempotency.Header, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		t.Run(fmt.Sprintf("%.20q", key), func(t *testing.T) {
			wantError(t, w, http.StatusBadRequest, "idempotency_key_invalid")
		})
	}
	if n := p.runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times for malformed keys", n)
	}
}

func TestARetryGetsTheKeptResponseWithoutRunningAgain(t *testing.T) {
	p := &payments{}
	h := newMiddleware(t, idempotency.Config{App: "shop"}, p)
	first := do(h, http.MethodPost, "/payments?currency=EUR&amount=10", "pay-1", "to bob")
	if first.Code != http.StatusCreated {
		t.Fatalf("first: status %d, want 201 (%q)", first.Code, first.Body)
	}
	firstID := first.Header().Get(idempotency.DefaultRequestIDHeader)
	for i := range 3 {
		// The same query in another order is the same request.
		again := do(h, http.MethodPost, "/payments?amount=10&currency=EUR", `"pay-1"`, "to bob")
		if again.Code != first.Code || again.Body.String() != first.Body.String() || again.Header().Get("Location") != first.Header().Get("Location") {
			t.Fatalf("retry %d: %d %q %q, want the first response %d %q %q", i, again.Code, again.Header().Get("Location"), again.Body,
				first.Code, first.Header().Get("Location"), first.Body)
		}
		if again.Header().Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("retry %d: no %s header", i, idempotency.ReplayedHeader)
		}
		if id := again.Header().Get(idempotency.DefaultRequestIDHeader); id == "" || id == firstID {
			t.Fatalf("retry %d: request id %q, want a new one (first %q)", i, id, firstID)
		}
	}
	if n := p.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
	if first.Header().Get(idempotency.ReplayedHeader) != "" {
		t.Fatal("the first response says it was replayed")
	}
}

func TestTheSameKeyForAnotherRequestConflicts(t *testing.T) {
	p := &payments{}
	h := newMiddleware(t, idempotency.Config{}, p)
	if w := do(h, http.MethodPost, "/payments?amount=10", "pay-2", "to bob"); w.Code != http.StatusCreated {
		t.Fatalf("first: status %d", w.Code)
	}
	wantError(t, do(h, http.MethodPost, "/payments?amount=10", "pay-2", "to eve"), http.StatusConflict, "idempotency_key_reused")
	wantError(t, do(h, http.MethodPost, "/payments?amount=99", "pay-2", "to bob"), http.StatusConflict, "idempotency_key_reused")
	if n := p.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}

func TestKeysAreScopedByRouteAndTenant(t *testing.T) {
	p := &payments{}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", p)
	mux.Handle("POST /refunds", p)
	h := newMiddleware(t, idempotency.Config{
		Tenant: func(r *http.Request) (string, error) {
			if t := r.Header.Get("X-Tenant"); t != "" {
				return t, nil
			}
			return "", errors.New("no X-Tenant header")
		},
		Route: func(r *http.Request) string { return r.URL.Path },
	}, mux)
	post := func(path, tenant string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader("same body"))
		r.Header.Set(idempotency.Header, "k1")
		if tenant != "" {
			r.Header.Set("X-Tenant", tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct{ path, tenant string }{{"/payments", "acme"}, {"/payments", "globex"}, {"/refunds", "acme"}} {
		if w := post(c.path, c.tenant); w.Code != http.StatusCreated || w.Header().Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("%s for %s: %d replayed=%q, want a first run", c.path, c.tenant, w.Code, w.Header().Get(idempotency.ReplayedHeader))
		}
	}
	if w := post("/payments", "acme"); w.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("the same route, tenant and key ran again (%d)", w.Code)
	}
	wantError(t, post("/payments", ""), http.StatusBadRequest, "tenant_unknown")
	if n := p.runs.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3 (one per scope)", n)
	}
}

func TestARetryWhileTheFirstRunsIsToldToWait(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		close(entered)
		<-release
		fmt.Fprint(w, "done")
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	var first *httptest.ResponseRecorder
	go func() {
		defer wg.Done()
		first = do(h, http.MethodPost, "/slow", "k", "b")
	}()
	<-entered
	w := do(h, http.MethodPost, "/slow", "k", "b")
	wantError(t, w, http.StatusConflict, "request_in_progress")
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("in-progress answer without Retry-After")
	}
	close(release)
	wg.Wait()
	if first.Code != http.StatusOK || first.Body.String() != "done" {
		t.Fatalf("first: %d %q", first.Code, first.Body)
	}
	if again := do(h, http.MethodPost, "/slow", "k", "b"); again.Body.String() != "done" || again.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("after completion: %d %q, want the replay", again.Code, again.Body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestUnguardedMethodsRunEveryTimeWithARequestID(t *testing.T) {
	var ids []string
	h := newMiddleware(t, idempotency.Config{Methods: []string{http.MethodPut}, RequestIDHeader: "X-Trace"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids = append(ids, idempotency.RequestID(r.Context()))
	}))
	for range 2 {
		w := do(h, http.MethodPost, "/x", "", "")
		if w.Code != http.StatusOK {
			t.Fatalf("unguarded POST: %d", w.Code)
		}
		if got := w.Header().Get("X-Trace"); got == "" || got != ids[len(ids)-1] {
			t.Fatalf("response id %q, context id %q", got, ids[len(ids)-1])
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] || len(ids[0]) != 32 {
		t.Fatalf("request ids %q: want two different 32-hex-digit ids", ids)
	}
	wantCode := func(w *httptest.ResponseRecorder) {
		t.Helper()
		var e errorBody
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusBadRequest || e.Error.Code != "idempotency_key_missing" || e.Error.RequestID != w.Header().Get("X-Trace") {
			t.Fatalf("guarded PUT without key: %d %q", w.Code, w.Body)
		}
	}
	wantCode(do(h, http.MethodPut, "/x", "", ""))
}

func TestAHandlerThatPanicsKeepsA500ForItsKey(t *testing.T) {
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		fmt.Fprint(w, "half")
		panic("boom")
	}))
	w := httptest.NewRecorder()
	func() {
		defer func() {
			if recover() != "boom" {
				t.Error("the panic was not raised again for net/http")
			}
		}()
		r := httptest.NewRequest(http.MethodPost, "/p", strings.NewReader("b"))
		r.Header.Set(idempotency.Header, "k")
		h.ServeHTTP(w, r)
	}()
	wantError(t, w, http.StatusInternalServerError, "handler_failed")
	again := do(h, http.MethodPost, "/p", "k", "b")
	if again.Code != http.StatusInternalServerError || again.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry after a panic: %d replayed=%q, want the kept 500", again.Code, again.Header().Get(idempotency.ReplayedHeader))
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestOversizedBodiesAndResponses(t *testing.T) {
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{MaxBody: 8, MaxResponse: 4}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if _, err := fmt.Fprint(w, "too long"); err == nil {
			t.Error("a write past MaxResponse succeeded")
		}
	}))
	wantError(t, do(h, http.MethodPost, "/p", "k1", "123456789"), http.StatusRequestEntityTooLarge, "body_too_large")
	if n := runs.Load(); n != 0 {
		t.Fatalf("handler ran for an oversized body")
	}
	wantError(t, do(h, http.MethodPost, "/p", "k2", "12345678"), http.StatusInternalServerError, "response_too_large")
	if again := do(h, http.MethodPost, "/p", "k2", "12345678"); again.Code != http.StatusInternalServerError || runs.Load() != 1 {
		t.Fatalf("retry: %d after %d runs, want the kept 500 after one run", again.Code, runs.Load())
	}
}

// failingStore fails Begin or Complete.
type failingStore struct {
	idempotency.Store
	begin, complete error
}

func (f failingStore) Begin(ctx context.Context, s idempotency.Scope, key string, h idempotency.Hash) (idempotency.Claim, error) {
	if f.begin != nil {
		return idempotency.Claim{}, f.begin
	}
	return f.Store.Begin(ctx, s, key, h)
}

func (f failingStore) Complete(ctx context.Context, s idempotency.Scope, key string, attempt uint64, r idempotency.Response) error {
	if f.complete != nil {
		return f.complete
	}
	return f.Store.Complete(ctx, s, key, attempt, r)
}

func TestAStoreThatFailsFailsClosed(t *testing.T) {
	mem, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := &payments{}
	h := newMiddleware(t, idempotency.Config{Store: failingStore{Store: mem, begin: errors.New("down")}}, p)
	wantError(t, do(h, http.MethodPost, "/p", "k", "b"), http.StatusServiceUnavailable, "idempotency_unavailable")
	if p.runs.Load() != 0 {
		t.Fatal("handler ran though the store could not begin")
	}
	h = newMiddleware(t, idempotency.Config{Store: failingStore{Store: mem, complete: errors.New("down")}}, p)
	w := do(h, http.MethodPost, "/p", "k", "b")
	wantError(t, w, http.StatusServiceUnavailable, "outcome_unknown")
	if p.runs.Load() != 1 || strings.Contains(w.Body.String(), "payment") {
		t.Fatalf("response %q sent though the store did not keep it", w.Body)
	}
}

func TestConfigIsValidated(t *testing.T) {
	mem, _ := idempotency.NewMemoryStore(idempotency.MemoryConfig{})
	for _, cfg := range []idempotency.Config{
		{},
		{Store: mem, MaxBody: -1},
		{Store: mem, MaxResponse: -1},
		{Store: mem, StoreTimeout: -1},
		{Store: mem, Methods: []string{"post"}},
	} {
		if _, err := idempotency.New(cfg); !errors.Is(err, idempotency.ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// whoAsks is an actor that answers the request id its handler sees.
type whoAsksMsg interface{ whoAsksMsg() }

type whoAsks struct {
	actor.Reply[whoAsksMsg, string]
}

func (whoAsks) whoAsksMsg() {}

var whoAsksDef = actor.Define("who-asks", func(c *actor.Context[int, whoAsksMsg], m whoAsksMsg) error {
	return actor.Respond(c, m.(whoAsks), c.RequestID())
}).WithMessages(whoAsks{})

func TestAnAskFromAGuardedHandlerCarriesTheHTTPRequestID(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, whoAsksDef)
	var seen string
	h := newMiddleware(t, idempotency.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := actor.Ask(r.Context(), whoAsksDef.Ref(sys, "a"), whoAsks{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		seen = id
		w.WriteHeader(http.StatusCreated)
	}))
	w := do(h, http.MethodPost, "/payments", "key-1", "{}")
	if id := w.Header().Get(idempotency.DefaultRequestIDHeader); w.Code != http.StatusCreated || id == "" || seen != id {
		t.Fatalf("status %d, the actor saw request id %q, the response names %q: want 201 and the same id", w.Code, seen, id)
	}
}

// seeTrace is an actor that answers the trace context its handler sees.
type seeTrace struct {
	actor.Reply[whoAsksMsg, actor.TraceContext]
}

func (seeTrace) whoAsksMsg() {}

var seeTraceDef = actor.Define("see-trace", func(c *actor.Context[int, whoAsksMsg], m whoAsksMsg) error {
	return actor.Respond(c, m.(seeTrace), c.TraceContext())
}).WithMessages(seeTrace{})

func TestTheTraceContextHeadersReachTheActorsTheHandlerAsks(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, seeTraceDef)
	var seen actor.TraceContext
	h := newMiddleware(t, idempotency.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tc, err := actor.Ask(r.Context(), seeTraceDef.Ref(sys, "a"), seeTrace{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		seen = tc
	}))
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name    string
		parents []string
		states  []string
		want    actor.TraceContext
	}{
		{"both", []string{parent}, []string{"congo=t61rcWkgMzE"}, actor.TraceContext{Parent: parent, State: "congo=t61rcWkgMzE"}},
		{"tracestate headers joined", []string{parent}, []string{"rojo=1", "congo=2"}, actor.TraceContext{Parent: parent, State: "rojo=1,congo=2"}},
		{"traceparent alone", []string{parent}, nil, actor.TraceContext{Parent: parent}},
		{"invalid tracestate dropped", []string{parent}, []string{"Not Valid"}, actor.TraceContext{Parent: parent}},
		{"invalid traceparent ignored", []string{"00-xyz"}, []string{"rojo=1"}, actor.TraceContext{}},
		{"two traceparents ignored", []string{parent, parent}, nil, actor.TraceContext{}},
		{"none", nil, nil, actor.TraceContext{}},
	} {
		r := httptest.NewRequest(http.MethodGet, "/trace", nil)
		for _, p := range tc.parents {
			r.Header.Add("traceparent", p)
		}
		for _, s := range tc.states {
			r.Header.Add("tracestate", s)
		}
		w := httptest.NewRecorder()
		seen = actor.TraceContext{Parent: "unset"}
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || seen != tc.want {
			t.Errorf("%s: status %d, the actor saw %+v: want 200 and %+v", tc.name, w.Code, seen, tc.want)
		}
	}
}
