package actor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

func TestInvalidOptionsAreReportedNamingTheDefinitionAndOption(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []actor.Option
		field string
	}{
		{"empty mailbox", []actor.Option{actor.WithMailbox(0, actor.Refuse)}, "WithMailbox"},
		{"unknown overflow", []actor.Option{actor.WithMailbox(8, actor.Overflow(9))}, "WithMailbox"},
		{"no replicas", []actor.Option{actor.WithReplicas(0, actor.WriteMajority)}, "WithReplicas"},
		{"too many replicas", []actor.Option{actor.WithReplicas(actor.MaxReplicas+1, actor.WriteAll)}, "WithReplicas"},
		{"unknown write level", []actor.Option{actor.WithReplicas(3, actor.WriteLevel(0))}, "WithReplicas"},
		{"pinned with replicas", []actor.Option{actor.Pinned(), actor.WithReplicas(3, actor.WriteMajority)}, "Pinned"},
		{"zero idle", []actor.Option{actor.WithIdleTimeout(0)}, "WithIdleTimeout"},
		{"negative ask timeout", []actor.Option{actor.WithAskTimeout(-time.Second)}, "WithAskTimeout"},
		{"backoff max below min", []actor.Option{actor.WithBackoff(time.Second, time.Millisecond)}, "WithBackoff"},
		{"zero backoff", []actor.Option{actor.WithBackoff(0, time.Second)}, "WithBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := actor.Define("bad", counterHandler, tc.opts...)
			err := def.Err()
			if !errors.Is(err, actor.ErrInvalidDefinition) {
				t.Fatalf("Err() = %v, want ErrInvalidDefinition", err)
			}
			var de *actor.DefinitionError
			if !errors.As(err, &de) || de.Definition != "bad" || de.Field != tc.field {
				t.Fatalf("DefinitionError = %+v, want definition bad, field %s", de, tc.field)
			}
			if !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q must name the definition and %s", err, tc.field)
			}
		})
	}
}

func TestValidOptionsAreAccepted(t *testing.T) {
	def := actor.Define("fine", counterHandler,
		actor.WithMailbox(1, actor.Wait), actor.WithIdleTimeout(time.Second), actor.WithAskTimeout(time.Second),
		actor.WithBackoff(time.Millisecond, time.Millisecond), actor.WithReplicas(actor.MaxReplicas, actor.WriteAll)).WithMessages(Add{}, Get{})
	if err := def.Err(); err != nil {
		t.Errorf("valid options rejected: %v", err)
	}
	if err := actor.Define("pinned", counterHandler, actor.Pinned(), actor.WithReplicas(1, actor.WriteOne)).Err(); err != nil {
		t.Errorf("a pinned definition with one replica rejected: %v", err)
	}
	if def.Name() != "fine" {
		t.Errorf("Name() = %q", def.Name())
	}
}

func TestDefinitionNeedsANameAndAHandler(t *testing.T) {
	for _, tc := range []struct {
		def   *actor.Def[int, CounterMsg]
		field string
	}{
		{actor.Define("", counterHandler), "name"},
		{actor.Define("a/b", counterHandler), "name"},
		{actor.Define(" padded", counterHandler), "name"},
		{actor.Define[int, CounterMsg]("no-handler", nil), "handler"},
	} {
		var de *actor.DefinitionError
		if err := tc.def.Err(); !errors.As(err, &de) || de.Field != tc.field || !errors.Is(err, actor.ErrInvalidDefinition) {
			t.Errorf("Define(%q).Err() = %v, want a DefinitionError on %s", tc.def.Name(), err, tc.field)
		}
	}
}

func TestEveryProblemOfADefinitionIsReported(t *testing.T) {
	err := actor.Define[func(), CounterMsg]("", nil, actor.WithMailbox(0, actor.Refuse)).Err()
	if !errors.Is(err, actor.ErrInvalidDefinition) {
		t.Fatalf("Err() = %v", err)
	}
	for _, want := range []string{"name", "handler", "WithMailbox", "state"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %q, want it to mention %s", err, want)
		}
	}
}

func TestOverflowPrints(t *testing.T) {
	if actor.Refuse.String() != "refuse" || actor.Wait.String() != "wait" || actor.Overflow(7).String() != "Overflow(7)" {
		t.Errorf("Overflow strings: %v %v %v", actor.Refuse, actor.Wait, actor.Overflow(7))
	}
}

func TestADurableDefinitionNeedsItsMessagesListed(t *testing.T) {
	for _, opt := range []actor.Option{actor.Durable(), actor.WithReplicas(3, actor.WriteMajority)} {
		def := actor.Define("stored", counterHandler, opt)
		var de *actor.DefinitionError
		if err := def.Err(); !errors.As(err, &de) || de.Field != "WithMessages" {
			t.Fatalf("a durable definition of an interface message type without WithMessages: %v, want a DefinitionError naming WithMessages", err)
		}
		if err := def.WithMessages(Add{}, Get{}).Err(); err != nil {
			t.Fatalf("with its messages listed: %v", err)
		}
	}
}
