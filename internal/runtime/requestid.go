package runtime

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/internal/host"
)

// requestIDKey is the context key under which an ask finds its request
// id: WithRequestID's (a *namedRequest), or a handler's Context's (a
// *host.RequestID, the id of the ask it handles; nil for a tell).
type requestIDKey struct{}

// namedRequest is an id a caller named, with why it is refused, if it
// is, and the idempotency key it named (see WithIdempotencyKey), with why
// that is refused: one context value for both, so that an ask looks up
// one.
type namedRequest struct {
	id      host.RequestID
	err     error
	idem    string
	idemErr error
	// tenant scopes idem (see WithTenant); tenantErr says why it is
	// refused.
	tenant    string
	tenantErr error
}

// scopedKey returns the idempotency key the ask carries (the tenant's
// scope included), or why it is refused.
func (nr *namedRequest) scopedKey() (string, error) {
	if nr.idemErr != nil {
		return "", nr.idemErr
	}
	if nr.idem == "" {
		return "", nil
	}
	if nr.tenantErr != nil {
		return "", nr.tenantErr
	}
	return host.ScopedIdempotencyKey(nr.tenant, nr.idem), nil
}

// WithRequestID returns ctx naming id as the request id of the asks made
// with it (or with contexts derived from it). An id that is not 1 to
// host.MaxRequestID visible ASCII bytes makes those asks fail with
// ErrInvalidRequestID.
func WithRequestID(ctx context.Context, id string) context.Context {
	nr := inherit(ctx)
	nr.id, nr.err = host.NamedRequestID(id), nil
	if why := host.ValidRequestID(id); why != "" {
		nr.err = fmt.Errorf("%w %q: %s", ErrInvalidRequestID, id, why)
	}
	return context.WithValue(ctx, requestIDKey{}, nr)
}

// requestOf returns the request id of an ask made with ctx through h
// (the one ctx names, or that of the ask its handler handles, or a new
// one) and the idempotency key ctx names ("" for none): one lookup of
// ctx for both. err says why either is refused.
func requestOf(ctx context.Context, h *host.Host) (rid host.RequestID, idem string, err error) {
	switch v := ctx.Value(requestIDKey{}).(type) {
	case *host.RequestID:
		if !v.IsZero() {
			return *v, "", nil
		}
	case *namedRequest:
		if v.err != nil {
			return v.id, "", v.err
		}
		idem, err := v.scopedKey()
		if err != nil {
			return v.id, "", err
		}
		if !v.id.IsZero() {
			return v.id, idem, nil
		}
		return h.NewRequestID(), idem, nil
	}
	return h.NewRequestID(), "", nil
}

// askFailed returns err, the failure of the ask rid on the asker's side,
// naming rid: a handler's failure in its RequestID, any other error
// wrapped in a *RequestError. An error the target declares (the
// handler's answer, to, nil for none, tells which) stays as it is.
func askFailed(err error, rid host.RequestID, to interface{ declares(error) bool }) error {
	if fe, ok := err.(*FailedError); ok {
		if fe.RequestID == "" {
			fe.RequestID = rid.String()
		}
		return err
	}
	if to != nil && to.declares(err) {
		return err
	}
	return &RequestError{RequestID: rid.String(), Err: err}
}
