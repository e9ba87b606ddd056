package codec

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
)

// Errors are the errors one definition declares its handler may answer
// with: sentinels, matched with errors.Is and known across nodes by their
// text, and error types, matched with errors.As and known by their Go
// name (package.Type), their value carried as msgpack. A declared error
// is an answer, not a failure, and crosses nodes as a
// *fault.DeclaredError that Decode turns back into the declared value.
type Errors struct {
	list   []*declared // in declaration order: the first match wins
	byName map[string]*declared
}

type declared struct {
	name     string
	sentinel error        // a sentinel; nil for a type
	t        reflect.Type // the error type, for a type
}

// Register declares errs for definition def: a nil pointer of an error
// type declares the type, any other value declares that value as a
// sentinel. It returns the problems, naming the field WithErrors.
func (e *Errors) Register(def string, errs []error) []*DefinitionError {
	if e.byName == nil {
		e.byName = map[string]*declared{}
	}
	var probs []*DefinitionError
	bad := func(format string, args ...any) {
		probs = append(probs, &DefinitionError{Definition: def, Field: "WithErrors", Problem: fmt.Sprintf(format, args...)})
	}
	for _, err := range errs {
		if err == nil {
			bad("nil error")
			continue
		}
		d := &declared{}
		v := reflect.ValueOf(err)
		if what := runtimeError(err, v); what != "" {
			bad("%s is the runtime's own error: it stays a failure or the runtime's answer", what)
			continue
		}
		if v.Kind() == reflect.Pointer && v.IsNil() {
			d.t, d.name = v.Type(), v.Type().String()
			if field, typ := unencodable(v.Type().Elem(), d.name, map[reflect.Type]bool{}); field != "" {
				bad("%s: type %s cannot be encoded", field, typ)
				continue
			}
		} else {
			d.sentinel, d.name = err, err.Error()
			if d.name == "" {
				bad("a sentinel with empty text cannot be told from others")
				continue
			}
		}
		if _, dup := e.byName[d.name]; dup {
			bad("two errors named %q", d.name)
			continue
		}
		e.byName[d.name] = d
		e.list = append(e.list, d)
	}
	return probs
}

// runtimeSentinels are the runtime's own sentinels, which no definition
// may declare: an ask that fails with one must keep meaning what the
// runtime says it means.
var runtimeSentinels = [...]error{
	fault.ErrMailboxFull, fault.ErrSystemClosed, fault.ErrUnknownActor, fault.ErrActorFailed,
	fault.ErrNilRef, fault.ErrInvalidRef, fault.ErrNoReply, fault.ErrInvalidDefinition,
	fault.ErrUnavailable, fault.ErrAskCycle, fault.ErrWrongReply, fault.ErrUndecodable,
	fault.ErrMessageTooLarge,
}

// runtimeError names err when it is one of the runtime's own errors, or
// of their types (v is err's reflect.Value): a sentinel that matches a
// runtime sentinel, or a failure, panic, cycle or definition error,
// among them the typed API's, which convert to the runtime's through As.
// Declaring one would turn a panic or a failure into an answer.
func runtimeError(err error, v reflect.Value) string {
	if v.Kind() != reflect.Pointer || !v.IsNil() {
		return matchesRuntime(err, fmt.Sprintf("%q", err.Error()))
	}
	// A declared type: look at a zero value of it, since the typed API's
	// methods read their receiver.
	z, ok := reflect.New(v.Type().Elem()).Interface().(error)
	if !ok {
		return ""
	}
	return matchesRuntime(z, v.Type().String())
}

// matchesRuntime is runtimeError on a non-nil probe; a probe whose
// methods panic on a zero value is not the runtime's.
func matchesRuntime(probe error, name string) (what string) {
	defer func() {
		if recover() != nil {
			what = ""
		}
	}()
	for _, s := range runtimeSentinels {
		if errors.Is(probe, s) {
			return fmt.Sprintf("%s (%v)", name, s)
		}
	}
	var (
		fe *fault.FailedError
		pe *fault.PanicError
		ce *fault.CycleError
		de *fault.DefinitionError
	)
	if errors.As(probe, &fe) || errors.As(probe, &pe) || errors.As(probe, &ce) || errors.As(probe, &de) {
		return name
	}
	return ""
}

// find returns the first declared error that err is or wraps, and the
// matching value in err's chain.
func (e *Errors) find(err error) (*declared, error) {
	if e == nil || err == nil {
		return nil, nil
	}
	for _, d := range e.list {
		if d.sentinel != nil {
			if errors.Is(err, d.sentinel) {
				return d, d.sentinel
			}
			continue
		}
		p := reflect.New(d.t)
		if errors.As(err, p.Interface()) {
			return d, p.Elem().Interface().(error)
		}
	}
	return nil, nil
}

// Declares reports whether err is, or wraps, a declared error. A
// failure (*fault.FailedError, such as the error of an ask to an actor
// that failed) is never declared, whatever its cause: a declared error
// inside it was its own actor's failure, and across nodes it arrives
// inside the failure too, so counting it here would make the outcome
// depend on where that actor lived.
func (e *Errors) Declares(err error) bool {
	if e == nil || len(e.list) == 0 {
		return false
	}
	var fe *fault.FailedError
	if errors.As(err, &fe) {
		return false
	}
	d, _ := e.find(err)
	return d != nil
}

// Encode returns the form of err that crosses nodes, when err is or
// wraps a declared error: the first declared error found (in declaration
// order) with err's own text. A type whose value does not encode is sent
// as its text alone, decoded as the zero value of the type.
func (e *Errors) Encode(err error) (*fault.DeclaredError, bool) {
	d, v := e.find(err)
	if d == nil {
		return nil, false
	}
	out := &fault.DeclaredError{Name: d.name, Text: err.Error()}
	if d.t != nil {
		if b, merr := msgpack.Marshal(v); merr == nil {
			out.Body = b
		}
	}
	return out, true
}

// Decode turns de back into the declared error it names: the sentinel, or
// a decoded value of the type; wrapped, when de's text is not the
// declared error's own, in an error with that text.
func (e *Errors) Decode(h *host.Host, de *fault.DeclaredError) error {
	var d *declared
	if e != nil {
		d = e.byName[de.Name]
	}
	if d == nil {
		return fmt.Errorf("%w: error %q is not declared by the definition here: %s", ErrUndecodable, de.Name, de.Text)
	}
	v := d.sentinel
	if d.t != nil {
		p := reflect.New(d.t.Elem())
		if len(de.Body) > 0 {
			if err := decodeBound(h, de.Body, p.Interface()); err != nil {
				return fmt.Errorf("%w: error %s: %w (%s)", ErrUndecodable, de.Name, err, de.Text)
			}
		}
		v = p.Interface().(error)
	}
	if v.Error() == de.Text {
		return v
	}
	return &wrappedError{text: de.Text, err: v}
}

// wrappedError is a declared error that arrived wrapped: the wrapper's
// text around the declared value.
type wrappedError struct {
	text string
	err  error
}

func (w *wrappedError) Error() string { return w.text }
func (w *wrappedError) Unwrap() error { return w.err }
