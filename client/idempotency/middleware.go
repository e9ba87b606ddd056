package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// DefaultRequestIDHeader is the response header that carries the request
// id unless Config.RequestIDHeader names another.
const DefaultRequestIDHeader = "X-Request-Id"

// ReplayedHeader is set to "true" on a response served from a kept one.
const ReplayedHeader = "Idempotent-Replayed"

// Config configures the middleware. Store is required; the zero value of
// every other field means its default.
type Config struct {
	// Store keeps the records.
	Store Store
	// App names the application in every key's scope.
	App string
	// Methods are the methods that need a key. Default POST and PATCH.
	Methods []string
	// Route names the route in a key's scope. Default: the pattern the
	// request matched on an http.ServeMux (Request.Pattern), else its path.
	Route func(*http.Request) string
	// Tenant names the tenant in a key's scope. Default: none. An error
	// answers 400 without running the handler (the error is logged, not
	// sent).
	Tenant func(*http.Request) (string, error)
	// RequestIDHeader is the response header for the request id. Default
	// DefaultRequestIDHeader.
	RequestIDHeader string
	// MaxBody bounds a guarded request's body, in bytes: it is read whole
	// to be hashed. Default 1 MiB.
	MaxBody int64
	// MaxResponse bounds a kept response's body, in bytes. Default 1 MiB.
	MaxResponse int
	// StoreTimeout bounds each call to the store. Default 10 s.
	StoreTimeout time.Duration
	// Logger gets what goes wrong (store failures, panics, tenant
	// errors). Default: discarded.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Config.Store is nil", ErrInvalidConfig)
	case c.MaxBody < 0:
		return fmt.Errorf("%w: Config.MaxBody %d is negative", ErrInvalidConfig, c.MaxBody)
	case c.MaxResponse < 0:
		return fmt.Errorf("%w: Config.MaxResponse %d is negative", ErrInvalidConfig, c.MaxResponse)
	case c.StoreTimeout < 0:
		return fmt.Errorf("%w: Config.StoreTimeout %v is negative", ErrInvalidConfig, c.StoreTimeout)
	}
	for _, m := range c.Methods {
		if m == "" || strings.ToUpper(m) != m {
			return fmt.Errorf("%w: Config.Methods: %q is not an upper-case method", ErrInvalidConfig, m)
		}
	}
	if c.Methods == nil {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.Route == nil {
		c.Route = func(r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.URL.Path
		}
	}
	if c.RequestIDHeader == "" {
		c.RequestIDHeader = DefaultRequestIDHeader
	}
	if c.MaxBody == 0 {
		c.MaxBody = 1 << 20
	}
	if c.MaxResponse == 0 {
		c.MaxResponse = 1 << 20
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

type requestIDKey struct{}

// RequestID returns the request id the middleware gave the request whose
// context ctx is (or derives from), or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// New returns the middleware.
func New(cfg Config) (func(http.Handler) http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return &middleware{cfg: cfg, next: next}
	}, nil
}

type middleware struct {
	cfg  Config
	next http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := newRequestID()
	w.Header().Set(m.cfg.RequestIDHeader, id)
	ctx := actor.WithRequestID(context.WithValue(r.Context(), requestIDKey{}, id), id) // its asks carry it
	if tc, ok := traceContext(r.Header); ok {
		ctx = actor.WithTraceContext(ctx, tc) // its tells and asks carry it
	}
	r = r.WithContext(ctx)
	if !slices.Contains(m.cfg.Methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	vals := r.Header.Values(Header)
	if len(vals) == 0 {
		writeError(w, id, http.StatusBadRequest, "idempotency_key_missing", "this request needs an "+Header+" header")
		return
	}
	if len(vals) > 1 {
		writeError(w, id, http.StatusBadRequest, "idempotency_key_invalid", "more than one "+Header+" header")
		return
	}
	key, err := ParseKey(vals[0])
	if err != nil {
		writeError(w, id, http.StatusBadRequest, "idempotency_key_invalid", err.Error())
		return
	}
	scope := Scope{App: m.cfg.App, Route: m.cfg.Route(r)}
	if m.cfg.Tenant != nil {
		if scope.Tenant, err = m.cfg.Tenant(r); err != nil {
			m.cfg.Logger.Warn("idempotency: no tenant for the request", "request_id", id, "err", err)
			writeError(w, id, http.StatusBadRequest, "tenant_unknown", "the request's tenant could not be determined")
			return
		}
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, id, http.StatusBadRequest, "query_invalid", "the query string does not parse")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.cfg.MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, id, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is over %d bytes", m.cfg.MaxBody))
			return
		}
		writeError(w, id, http.StatusBadRequest, "body_unreadable", "the body could not be read")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	hash := RequestHash(r.Method, r.URL.Path, query, body)

	ctx, cancel := context.WithTimeout(r.Context(), m.cfg.StoreTimeout)
	claim, err := m.cfg.Store.Begin(ctx, scope, key, hash)
	cancel()
	if err != nil {
		m.cfg.Logger.Warn("idempotency: store refused to begin", "request_id", id, "err", err)
		writeError(w, id, http.StatusServiceUnavailable, "idempotency_unavailable", "the idempotency store did not answer; retry with the same key")
		return
	}
	switch claim.Outcome {
	case Replay:
		replay(w, claim.Response, m.cfg.RequestIDHeader)
	case InProgress:
		w.Header().Set("Retry-After", "1")
		writeError(w, id, http.StatusConflict, "request_in_progress", "a request with this key is still running; retry later")
	case Conflict:
		writeError(w, id, http.StatusConflict, "idempotency_key_reused", "this key was used for a different request")
	case Started:
		m.run(w, r, scope, key, claim.Attempt)
	default:
		m.cfg.Logger.Error("idempotency: store answered an unknown outcome", "request_id", id, "outcome", claim.Outcome)
		writeError(w, id, http.StatusInternalServerError, "idempotency_store_broken", "the idempotency store answered nonsense")
	}
}

// run runs the handler on a held response, keeps the response, then
// sends it.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, scope Scope, key string, attempt uint64) {
	id := RequestID(r.Context())
	h := &heldWriter{header: w.Header().Clone(), limit: m.cfg.MaxResponse}
	panicked := true
	var recovered any
	func() {
		defer func() {
			if panicked {
				recovered = recover()
			}
		}()
		m.next.ServeHTTP(h, r)
		panicked = false
	}()
	resp := h.response()
	switch {
	case panicked:
		m.cfg.Logger.Error("idempotency: handler panicked; its key keeps a 500", "request_id", id, "panic", recovered)
		resp = errorResponse(w.Header(), id, http.StatusInternalServerError, "handler_failed", "the handler failed; this key keeps that outcome")
	case h.over:
		m.cfg.Logger.Error("idempotency: response over MaxResponse; its key keeps a 500", "request_id", id, "limit", m.cfg.MaxResponse)
		resp = errorResponse(w.Header(), id, http.StatusInternalServerError, "response_too_large", "the response was too large to keep; this key keeps that outcome")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.StoreTimeout)
	err := m.cfg.Store.Complete(ctx, scope, key, attempt, resp)
	cancel()
	if err != nil {
		m.cfg.Logger.Warn("idempotency: store did not keep the response", "request_id", id, "err", err)
		writeError(w, id, http.StatusServiceUnavailable, "outcome_unknown", "the request ran but its response could not be kept; retry with the same key")
	} else {
		send(w, resp)
	}
	if panicked {
		panic(recovered)
	}
}

// The W3C trace context headers.
const (
	traceParentHeader = "Traceparent"
	traceStateHeader  = "Tracestate"
)

// traceContext returns the W3C trace context that h carries, taken as
// the specification asks a receiver to: none unless there is exactly one
// traceparent and it is valid; its tracestate (the headers' values
// joined with commas) only if valid.
func traceContext(h http.Header) (actor.TraceContext, bool) {
	parents := h.Values(traceParentHeader)
	if len(parents) != 1 {
		return actor.TraceContext{}, false
	}
	tc := actor.TraceContext{Parent: parents[0]}
	if tc.Validate() != nil {
		return actor.TraceContext{}, false
	}
	if states := h.Values(traceStateHeader); len(states) > 0 {
		tc.State = strings.Join(states, ",")
		if tc.Validate() != nil {
			tc.State = ""
		}
	}
	return tc, true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// heldWriter holds a handler's response whole, up to limit bytes of body.
type heldWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int
	over   bool
}

func (h *heldWriter) Header() http.Header { return h.header }

func (h *heldWriter) WriteHeader(status int) {
	if h.status == 0 && status >= 200 {
		h.status = status
	}
}

func (h *heldWriter) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if h.body.Len()+len(p) > h.limit {
		h.over = true
		return 0, errResponseTooLarge
	}
	return h.body.Write(p)
}

var errResponseTooLarge = errors.New("troupe: response over the idempotency middleware's MaxResponse")

func (h *heldWriter) response() Response {
	status := h.status
	if status == 0 {
		status = http.StatusOK
	}
	return Response{Status: status, Header: h.header, Body: h.body.Bytes()}
}

func send(w http.ResponseWriter, r Response) {
	hdr := w.Header()
	for k := range hdr {
		if _, ok := r.Header[k]; !ok {
			delete(hdr, k)
		}
	}
	for k, v := range r.Header {
		hdr[k] = slices.Clone(v)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

// replay sends a kept response, with this request's id.
func replay(w http.ResponseWriter, r *Response, idHeader string) {
	out := *r
	out.Header = r.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	out.Header.Set(idHeader, w.Header().Get(idHeader))
	out.Header.Set(ReplayedHeader, "true")
	send(w, out)
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

func errorResponse(base http.Header, id string, status int, code, msg string) Response {
	var e errorBody
	e.Error.Code, e.Error.Message, e.Error.RequestID = code, msg, id
	b, _ := json.Marshal(e) // strings only: never fails
	hdr := base.Clone()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	return Response{Status: status, Header: hdr, Body: append(b, '\n')}
}

func writeError(w http.ResponseWriter, id string, status int, code, msg string) {
	send(w, errorResponse(w.Header(), id, status, code, msg))
}
