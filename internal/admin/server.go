package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/adminui"
	"github.com/troupe-go/troupe/internal/probe"
)

// Options configures a Server.
type Options struct {
	// Listener is where the server accepts connections; the server
	// closes it.
	Listener net.Listener
	// TLS, if set, wraps Listener (it needs a certificate).
	TLS *tls.Config
	// Token, if not empty, is the bearer token every request must carry.
	Token string
	// Proxies are the trusted reverse proxies in front of the server,
	// whose X-Forwarded-For and user header it believes; none by
	// default.
	Proxies Proxies
	// Ready, if set, serves /healthz and /readyz: it reports whether the
	// process is ready and the body that says why (encoded as JSON).
	Ready func() (ready bool, body any)
	// Metrics, if set, serves /metrics.
	Metrics http.Handler
	// API, if set, serves /api/v1 and everything under /api/v1/, whatever the
	// method: it answers methods it does not serve itself, as JSON.
	API http.Handler
	// UI, if set, serves GET / and everything under /ui/ (package
	// adminui): the operator's page, which reads API.
	UI http.Handler
	// Logger receives the server's errors (at Debug: they are a
	// client's, such as a failed TLS handshake) and, at Debug, each
	// request and each refusal with its peer (never a credential). Nil
	// discards them.
	Logger *slog.Logger
}

// Server is a running administration server.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Timeouts and limits of the administration server: its clients are
// probes and scrapers, which send small requests and read small answers.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = time.Minute
	maxHeaderBytes    = 16 << 10
)

// Serve starts serving o on o.Listener until Close.
func Serve(o Options) *Server {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	if o.Ready != nil {
		mux.HandleFunc("GET /healthz", probe.Healthz)
		mux.HandleFunc("GET /readyz", probe.Readyz(o.Ready))
	}
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.API != nil {
		mux.Handle(adminapi.Prefix, o.API)
		mux.Handle(adminapi.Root, o.API)
	}
	if o.UI != nil {
		// "/{$}" is the root alone: other paths stay 404.
		mux.Handle("GET /{$}", o.UI)
		mux.Handle("GET "+adminui.Prefix, o.UI)
	}
	var h http.Handler = mux
	if o.Proxies.RequireUser {
		h = requireUser(log, h)
	}
	if o.Token != "" {
		h = bearer(o.Token, log, h)
	}
	proxies := o.Proxies
	proxies.Trusted = slices.Clone(proxies.Trusted)
	h = identify(&proxies, log, h)
	ln := o.Listener
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS.Clone())
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		addr: o.Listener.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("troupe: the admin listener stopped", "err", err)
		}
	}()
	return s
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the server: it stops accepting, lets the requests under way
// finish until ctx ends, then closes their connections. It returns once
// the server's goroutine has ended.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.done
	return err
}

// identify works out the request's peer (Proxies.peer), hands it on in
// the request's context and logs the request at Debug: the path, never
// the query (a where's key) or a header.
func identify(p *Proxies, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := p.peer(r)
		log.Debug("troupe: admin request", "method", r.Method, "path", r.URL.Path, "peer", peer)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, peer)))
	})
}

// refuse answers 401 with the API's JSON error, and logs the refusal at
// Debug with the peer and why (never what credential was sent).
func refuse(w http.ResponseWriter, r *http.Request, log *slog.Logger, why string) {
	peer, _ := PeerOf(r.Context())
	log.Debug("troupe: admin request refused", "path", r.URL.Path, "peer", peer, "why", why)
	w.Header().Set("WWW-Authenticate", `Bearer realm="troupe-admin"`)
	adminapi.WriteError(w, http.StatusUnauthorized, adminapi.CodeUnauthorized, why)
}

// bearer lets through the requests that carry token, and answers 401 to
// the others. The comparison takes the same time whatever the header
// holds: both sides are hashed to a fixed length first.
func bearer(token string, log *slog.Logger, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			refuse(w, r, log, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireUser lets through the requests a trusted proxy sent naming a
// user, and answers 401 to the others.
func requireUser(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer, _ := PeerOf(r.Context()); !peer.Proxied || peer.User == "" {
			refuse(w, r, log, "only requests from a trusted proxy that names the user are served")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme (RFC 6750: the scheme name is case-insensitive).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	return tok, tok != ""
}
