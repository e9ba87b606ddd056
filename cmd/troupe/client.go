package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/troupe-go/troupe/internal/admin"
	"github.com/troupe-go/troupe/internal/adminapi"
)

// maxBody bounds what the CLI reads of an answer: a page of 1000 members
// is well under it.
const maxBody = 32 << 20

// client talks to one admin listener.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
	tr    *http.Transport
}

// newClient builds the client o describes. Its errors are usage errors
// (bad address, a certificate without its key) or unreadable files.
func newClient(o *options) (*client, error) {
	if err := admin.ValidToken(o.token); err != nil {
		return nil, usagef("the token: %v", err) // ValidToken never repeats it
	}
	useTLS := o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != ""
	base, err := baseURL(o.addr, useTLS)
	if err != nil {
		return nil, err
	}
	// No proxy from the environment: the bearer token goes to the
	// listener named, not to whatever HTTP_PROXY says.
	tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true}
	if base.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.tlsCA != "" {
			pem, err := os.ReadFile(o.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca: %s holds no PEM certificate", o.tlsCA)
			}
		}
		if (o.tlsCert == "") != (o.tlsKey == "") {
			return nil, usagef("--tls-cert and --tls-key go together")
		}
		if o.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("the client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = cfg
	}
	return &client{base: base, token: o.token, http: &http.Client{Transport: tr}, tr: tr}, nil
}

// baseURL turns --addr into the listener's URL.
func baseURL(addr string, useTLS bool) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, usagef("--addr %q is neither host:port nor a URL", addr)
		}
		scheme := "http"
		if useTLS {
			scheme = "https"
		}
		addr = scheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--addr %q is not an http(s) URL of a host", addr)
	}
	if useTLS && u.Scheme == "http" {
		return nil, usagef("TLS flags with an http:// address: use https://")
	}
	if u.User != nil {
		return nil, usagef("--addr must not hold credentials: use --token")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
		return nil, usagef("--addr must not hold a query or a fragment")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

func (c *client) close() { c.tr.CloseIdleConnections() }

// get fetches path?q and returns the body of a 200; any other answer is
// an error that says what happened.
func (c *client) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no answer within --timeout", c.base.Host)
		}
		// Not the URL: where's holds the key, which only its answer echoes.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", c.base.Host, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	return nil, c.failure(resp.StatusCode, body)
}

// failure explains a non-200 answer.
func (c *client) failure(code int, body []byte) error {
	var e adminapi.ErrorResponse
	isAPI := json.Unmarshal(body, &e) == nil && e.Error.Code != ""
	msg := e.Error.Message
	switch {
	case code == http.StatusUnauthorized && c.token == "":
		return fmt.Errorf("unauthorized (401): %s wants a bearer token: pass --token or set %s", c.base.Host, tokenEnv)
	case code == http.StatusUnauthorized:
		return fmt.Errorf("unauthorized (401): %s refused the token", c.base.Host)
	case code == http.StatusServiceUnavailable && isAPI:
		return fmt.Errorf("unavailable (503): %s", msg)
	case code == http.StatusNotFound && !isAPI:
		return fmt.Errorf("%s serves no /api/v1 (404): is AdminConfig.API on?", c.base.Host)
	case e.Error.Code == adminapi.CodeTypeNotHostedHere && len(e.Error.Hosts) > 0:
		return fmt.Errorf("%s (%d %s): %s: --addr one of %s", e.Error.Code, code, http.StatusText(code), msg, strings.Join(e.Error.Hosts, ", "))
	case isAPI:
		return fmt.Errorf("%s (%d %s): %s", e.Error.Code, code, http.StatusText(code), msg)
	}
	return fmt.Errorf("%s answered %d %s", c.base.Host, code, http.StatusText(code))
}
