package system

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/troupe-go/troupe/internal/admin"
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/adminui"
)

// AdminConfig configures a system's administration listener: an HTTP
// server of its own, apart from the cluster's traffic, with each surface
// switched on by its own field. See the package doc, "Administration".
type AdminConfig struct {
	// Bind is the address the listener binds. Port 0 picks a free port,
	// which System.AdminAddr reports. Default DefaultAdminBind (loopback
	// only).
	Bind string

	// Listener, if set, is where the admin server accepts connections
	// instead of a listener on Bind. The system closes it.
	Listener net.Listener

	// Health serves GET /healthz (200 while the process can answer it)
	// and GET /readyz (200 when every readiness check passes, 503
	// otherwise, with a JSON body listing the checks).
	Health bool

	// Metrics serves GET /metrics: Gatherer's metrics, in Prometheus's
	// exposition formats. Needs Gatherer or a Config.Metrics that is
	// also a prometheus.Gatherer (a *prometheus.Registry is).
	Metrics bool

	// API serves the management API, read-only JSON under /api/v1/:
	// this member's status, the members as it sees them, the cluster's
	// node records (see Config.Records), placement (the
	// share of each ring each member owns, where a key lives) and the
	// actor types it hosts. docs/operations.md is its reference; within
	// v1 it only grows. A standalone system serves it too and says so.
	API bool

	// UI serves the operator's page at GET / (its script and style under
	// /ui/): the members with their status, their node records (health,
	// readiness, heartbeat age, counters, labels), each member's share of
	// each ring, this member's readiness and counters and a key lookup,
	// refreshed every second, the last data kept and marked stale when a
	// refresh fails. The page is a client of the API and of nothing else,
	// so UI needs API: Validate refuses UI without it rather than switch
	// the API on unasked. Embedded in the binary; nothing is fetched from
	// elsewhere. With a Token the page is behind it too: the browser must
	// send the header (an authenticating proxy in front, say).
	UI bool

	// Gatherer is what /metrics serves. Default: Config.Metrics, when it
	// is a prometheus.Gatherer.
	Gatherer prometheus.Gatherer

	// TLS, if set, makes the listener speak TLS with this config, which
	// must hold a certificate (Certificates, GetCertificate or
	// GetConfigForClient). Its ClientAuth and ClientCAs decide whether
	// clients must present certificates.
	TLS *tls.Config

	// Token, if not empty, is a bearer token every request must carry
	// ("Authorization: Bearer <token>"), on every path: a request
	// without it, or with another, gets 401. Letters, digits and -._~+/=
	// only. It is never logged; String and LogValue redact it. Send it
	// over TLS or on a trusted network only.
	Token string

	// TrustedProxies are the networks of the reverse proxies in front
	// of the listener whose identity headers it believes: a request
	// whose TCP peer is in one of them names its client in
	// X-Forwarded-For (the nearest address that is not a trusted proxy
	// is the client the logs name) and its user in ProxyUserHeader.
	// From any other peer both headers are removed, never believed.
	// Trusting a proxy does not waive the token: with Token set, every
	// request needs it, proxied or not. Networks, not hosts with bits
	// past the mask (10.0.0.0/8, not 10.0.0.5/8). Default none.
	TrustedProxies []netip.Prefix

	// ProxyUserHeader names the header a trusted proxy puts the user
	// it authenticated in; not a header of credentials or addresses
	// (Authorization, Cookie, X-Forwarded-For, ...). Default
	// "X-Forwarded-User". Needs TrustedProxies.
	ProxyUserHeader string

	// RequireProxyUser serves only the requests a trusted proxy sent
	// naming a user; the others get 401, on every path (fail closed:
	// for a listener that only an authenticating proxy should reach).
	// Needs TrustedProxies.
	RequireProxyUser bool
}

// DefaultAdminBind is the admin listener's default address: loopback, so
// that a listener switched on without more thought is not exposed.
const DefaultAdminBind = "127.0.0.1:7401"

// redacted stands for a secret in what a config prints.
const redacted = "[redacted]"

// String renders the config with its token redacted (GoString, LogValue
// and MarshalJSON too).
func (c AdminConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Bind:%s", c.Bind)
	if c.Listener != nil {
		fmt.Fprintf(&b, " Listener:%s", c.Listener.Addr())
	}
	fmt.Fprintf(&b, " Health:%t Metrics:%t API:%t UI:%t Gatherer:%t TLS:%t", c.Health, c.Metrics, c.API, c.UI, c.Gatherer != nil, c.TLS != nil)
	if c.Token != "" {
		b.WriteString(" Token:" + redacted)
	}
	if len(c.TrustedProxies) > 0 {
		fmt.Fprintf(&b, " TrustedProxies:%v", c.TrustedProxies)
	}
	if c.ProxyUserHeader != "" {
		b.WriteString(" ProxyUserHeader:" + c.ProxyUserHeader)
	}
	if c.RequireProxyUser {
		b.WriteString(" RequireProxyUser:true")
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, so that %#v redacts the token too.
func (c AdminConfig) GoString() string { return "system.AdminConfig" + c.String() }

// LogValue renders the config for log/slog with its token redacted.
func (c AdminConfig) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("bind", c.Bind), slog.Bool("health", c.Health),
		slog.Bool("metrics", c.Metrics), slog.Bool("api", c.API), slog.Bool("ui", c.UI), slog.Bool("tls", c.TLS != nil)}
	if c.Listener != nil {
		attrs = append(attrs, slog.String("listener", c.Listener.Addr().String()))
	}
	if c.Token != "" {
		attrs = append(attrs, slog.String("token", redacted))
	}
	if len(c.TrustedProxies) > 0 {
		attrs = append(attrs, slog.Any("trusted_proxies", c.proxyTexts()))
	}
	if c.ProxyUserHeader != "" {
		attrs = append(attrs, slog.String("proxy_user_header", c.ProxyUserHeader))
	}
	if c.RequireProxyUser {
		attrs = append(attrs, slog.Bool("require_proxy_user", true))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON renders the config as LogValue does, token redacted, for
// config dumps.
func (c AdminConfig) MarshalJSON() ([]byte, error) {
	v := struct {
		Bind     string `json:"bind,omitempty"`
		Listener string `json:"listener,omitempty"`
		Health   bool   `json:"health"`
		Metrics  bool   `json:"metrics"`
		API      bool   `json:"api"`
		UI       bool   `json:"ui"`
		Gatherer bool   `json:"gatherer"`
		TLS      bool   `json:"tls"`
		Token    string `json:"token,omitempty"`

		TrustedProxies   []string `json:"trusted_proxies,omitempty"`
		ProxyUserHeader  string   `json:"proxy_user_header,omitempty"`
		RequireProxyUser bool     `json:"require_proxy_user,omitempty"`
	}{Bind: c.Bind, Health: c.Health, Metrics: c.Metrics, API: c.API, UI: c.UI, Gatherer: c.Gatherer != nil, TLS: c.TLS != nil,
		TrustedProxies: c.proxyTexts(), ProxyUserHeader: c.ProxyUserHeader, RequireProxyUser: c.RequireProxyUser}
	if c.Listener != nil {
		v.Listener = c.Listener.Addr().String()
	}
	if c.Token != "" {
		v.Token = redacted
	}
	return json.Marshal(v)
}

// proxyTexts returns TrustedProxies as text, nil if none.
func (c AdminConfig) proxyTexts() []string {
	var ps []string
	for _, p := range c.TrustedProxies {
		ps = append(ps, p.String())
	}
	return ps
}

// validate reports the problems of c, a Config's Admin, whose Metrics
// registerer is reg.
func (c *AdminConfig) validate(reg prometheus.Registerer) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: Admin.%s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if !c.Health && !c.Metrics && !c.API && !c.UI {
		bad("Health", "no surface is switched on (Health, Metrics, API, UI): nothing to serve")
	}
	if c.UI && !c.API {
		bad("UI", "the UI reads the management API: switch API on too")
	}
	if c.Listener == nil && c.Bind != "" {
		if _, _, err := net.SplitHostPort(c.Bind); err != nil {
			bad("Bind", "%q is not host:port: %v", c.Bind, err)
		}
	}
	if c.Metrics && c.gatherer(reg) == nil {
		bad("Gatherer", "Metrics is on but there is nothing to serve: set Gatherer, or a Config.Metrics that is a prometheus.Gatherer")
	}
	if c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil && c.TLS.GetConfigForClient == nil {
		bad("TLS", "no certificate (Certificates, GetCertificate or GetConfigForClient)")
	}
	if err := admin.ValidToken(c.Token); err != nil {
		bad("Token", "%v", err)
	}
	for i, p := range c.TrustedProxies {
		switch {
		case !p.IsValid():
			bad("TrustedProxies", "entry %d is not a network", i)
		case p != p.Masked():
			bad("TrustedProxies", "%s has bits set past its mask: the network is %s", p, p.Masked())
		}
	}
	if c.ProxyUserHeader != "" {
		if err := admin.ValidUserHeader(c.ProxyUserHeader); err != nil {
			bad("ProxyUserHeader", "%q: %v", c.ProxyUserHeader, err)
		}
		if len(c.TrustedProxies) == 0 {
			bad("ProxyUserHeader", "no proxy is trusted to send it: set TrustedProxies")
		}
	}
	if c.RequireProxyUser && len(c.TrustedProxies) == 0 {
		bad("RequireProxyUser", "no proxy is trusted to name a user, so every request would be refused: set TrustedProxies")
	}
	return errs
}

// gatherer returns what /metrics serves, nil if nothing.
func (c *AdminConfig) gatherer(reg prometheus.Registerer) prometheus.Gatherer {
	if c.Gatherer != nil {
		return c.Gatherer
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		return g
	}
	return nil
}

// startAdmin registers the system's metrics on cfg.Metrics and opens the
// admin listener of cfg.Admin, whichever are set. On error nothing stays
// open or registered once stopAdmin ran.
func (s *System) startAdmin(cfg Config) error {
	if cfg.Metrics != nil {
		col := newCollector(s)
		if err := cfg.Metrics.Register(col); err != nil {
			return fmt.Errorf("troupe: register the metrics: %w", err)
		}
		s.unregister = func() { cfg.Metrics.Unregister(col) }
	}
	a := cfg.Admin
	if a == nil {
		return nil
	}
	ln := a.Listener
	if ln == nil {
		bind := a.Bind
		if bind == "" {
			bind = DefaultAdminBind
		}
		var err error
		if ln, err = net.Listen("tcp", bind); err != nil {
			return fmt.Errorf("troupe: admin listener: %w", err)
		}
	}
	log := cfg.withDefaults().Logger
	o := admin.Options{Listener: ln, TLS: a.TLS, Token: a.Token, Logger: log, Proxies: admin.Proxies{
		Trusted: a.TrustedProxies, UserHeader: a.ProxyUserHeader, RequireUser: a.RequireProxyUser}}
	if a.Health {
		o.Ready = func() (bool, any) {
			r := s.Readiness()
			return r.Ready, r
		}
	}
	if a.Metrics {
		o.Metrics = promhttp.HandlerFor(a.gatherer(cfg.Metrics), promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			ErrorHandling: promhttp.ContinueOnError,
			Timeout:       10 * time.Second,
		})
	}
	if a.API {
		o.API = adminapi.New(newAPISource(s, moduleVersion()), adminapi.Options{})
	}
	if a.UI {
		o.UI = adminui.Handler()
	}
	s.admin = admin.Serve(o)
	return nil
}

// stopAdmin closes the admin listener and unregisters the metrics: the
// last steps of Close, so that readiness reports the close to the end.
func (s *System) stopAdmin(ctx context.Context) {
	s.adminOnce.Do(func() { s.closeAdmin(ctx) })
}

func (s *System) closeAdmin(ctx context.Context) {
	if s.admin != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		if err := s.admin.Close(actx); err != nil {
			s.h.Logger.Debug("troupe: closing the admin listener", "err", err)
		}
		cancel()
	}
	if s.unregister != nil {
		s.unregister()
	}
}

// AdminAddr returns the address of the admin listener ("" without one).
func (s *System) AdminAddr() string {
	if s.admin == nil {
		return ""
	}
	return s.admin.Addr().String()
}
