package system_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"github.com/troupe-go/troupe/wire"
)

func TestZeroConfigWorks(t *testing.T) {
	var cfg system.Config
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zero Config.Validate() = %v", err)
	}
	sys, err := system.New(cfg)
	if err != nil {
		t.Fatalf("New(Config{}) = %v", err)
	}
	if st := sys.Stats(); st != (system.Stats{}) {
		t.Errorf("Stats of an empty system = %+v", st)
	}
	if err := sys.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

func TestIdleTimeoutNeverIsValid(t *testing.T) {
	if err := (system.Config{IdleTimeout: actor.Never}).Validate(); err != nil {
		t.Errorf("IdleTimeout Never: %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   system.Config
		field string
	}{
		{"negative idle", system.Config{IdleTimeout: -time.Second}, "IdleTimeout"},
		{"negative ask", system.Config{AskTimeout: -1}, "AskTimeout"},
		{"negative backoff min", system.Config{BackoffMin: -1}, "BackoffMin"},
		{"negative backoff max", system.Config{BackoffMax: -1}, "BackoffMax"},
		{"max below min", system.Config{BackoffMin: time.Second, BackoffMax: time.Millisecond}, "BackoffMax"},
		{"max below default min", system.Config{BackoffMax: time.Millisecond}, "BackoffMax"},
		{"negative linger", system.Config{Linger: -1}, "Linger"},
		{"negative idle other than Never", system.Config{IdleTimeout: -2}, "IdleTimeout"},
		{"negative message limit", system.Config{MaxMessage: -1}, "MaxMessage"},
		{"message limit over 1 GiB", system.Config{MaxMessage: system.MaxMessageLimit + 1}, "MaxMessage"},
		{"unknown compression codec", system.Config{Compression: wire.Compression{Codecs: []string{"lz4"}}}, "Compression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, system.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate() = %q, want it to name %s", err, tc.field)
			}
			if _, nerr := system.New(tc.cfg); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New = %v, want the Validate error", nerr)
			}
		})
	}
}

func TestValidateRejectsANilDefinition(t *testing.T) {
	cfg := system.Config{Actors: []actor.Definition{probe("a", nil, nil), nil}}
	err := cfg.Validate()
	if !errors.Is(err, system.ErrInvalidConfig) || !strings.Contains(err.Error(), "Actors[1]") {
		t.Fatalf("Validate() = %v, want ErrInvalidConfig naming Actors[1]", err)
	}
	if _, err := system.New(cfg); err == nil {
		t.Fatal("New accepted a nil definition")
	}
}

func TestDuplicateTypeNamesAreRejectedNamingBoth(t *testing.T) {
	cfg := system.Config{Actors: []actor.Definition{probe("twin", nil, nil), probe("other", nil, nil), probe("twin", nil, nil)}}
	_, err := system.New(cfg)
	if !errors.Is(err, system.ErrDuplicateActor) {
		t.Fatalf("New = %v, want ErrDuplicateActor", err)
	}
	for _, want := range []string{`"twin"`, "Actors[0]", "Actors[2]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// Unencodable state types.
type (
	WithFunc struct {
		Name     string
		OnChange func()
	}
	Inner    struct{ Updates chan int }
	WithChan struct {
		Label string
		Inner Inner
	}
	WithMap struct {
		Callbacks map[string]func()
	}
	// Fine: unexported and skipped fields are not encoded.
	Skipped struct {
		Visible int
		//lint:ignore U1000 the test is that unexported fields are skipped
		hidden  func()
		Ignored chan int `msgpack:"-"`
	}
)

func stateDef[S any](name string) *actor.Def[S, Msg] {
	return actor.Define(name, func(*actor.Context[S, Msg], Msg) error { return nil })
}

func TestStateThatCannotBeEncodedIsRejectedNamingDefinitionAndField(t *testing.T) {
	for _, tc := range []struct {
		def   actor.Definition
		field string
	}{
		{stateDef[WithFunc]("with-func"), "state.OnChange"},
		{stateDef[WithChan]("with-chan"), "state.Inner.Updates"},
		{stateDef[*WithMap]("with-map"), "state[].Callbacks{}"},
		{stateDef[[]func()]("func-slice"), "state[]"},
		{stateDef[chan int]("bare-chan"), "state"},
	} {
		t.Run(tc.def.Name(), func(t *testing.T) {
			_, err := system.New(system.Config{Actors: []actor.Definition{tc.def}})
			if !errors.Is(err, actor.ErrInvalidDefinition) {
				t.Fatalf("New = %v, want ErrInvalidDefinition", err)
			}
			var de *actor.DefinitionError
			if !errors.As(err, &de) || de.Definition != tc.def.Name() || de.Field != tc.field {
				t.Fatalf("DefinitionError = %+v, want definition %q, field %q", de, tc.def.Name(), tc.field)
			}
			for _, want := range []string{tc.def.Name(), tc.field, "Actors[0]"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
	if err := stateDef[Skipped]("skipped").Err(); err != nil {
		t.Errorf("unexported and msgpack:\"-\" fields must be allowed: %v", err)
	}
}

func TestConfigDefaultsApplyToDefinitionsThatSetNothing(t *testing.T) {
	evs := systemtest.NewEvents(systemtest.Limit)
	own := probe("own", nil, nil, actor.WithIdleTimeout(actor.DefaultIdleTimeout))
	inherits := probe("inherits", nil, nil)
	sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe, IdleTimeout: time.Millisecond, Linger: time.Millisecond}, own, inherits)
	ctx := systemtest.Ctx(t)
	for _, ref := range []actor.Ref[Msg]{own.Ref(sys, "o"), inherits.Ref(sys, "i")} {
		if err := ref.Tell(ctx, Note{}); err != nil {
			t.Fatal(err)
		}
	}
	evs.WaitFor(t, "the inheriting key to idle out", systemtest.Is(system.ActivationEnded, "i"))
	// Once more, so that "o" has surely been idle for many sweeps.
	if err := inherits.Ref(sys, "i").Tell(ctx, Note{}); err != nil {
		t.Fatal(err)
	}
	systemtest.WaitUntil(t, "the inheriting key to idle out again", func() bool { return evs.Count(systemtest.Is(system.ActivationEnded, "i")) == 2 })
	if n := evs.Count(systemtest.Is(system.ActivationEnded, "o")); n != 0 {
		t.Errorf("a definition that chose the default idle timeout idled out at the system's 1ms")
	}
}
