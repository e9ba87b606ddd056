package replication

import (
	"errors"
	"strings"
	"testing"
)

func TestTheZeroLevelIsMajority(t *testing.T) {
	var l Level
	if l != Majority {
		t.Fatalf("the zero Level is %v, want majority", l)
	}
}

func TestQuorumsCountTheWholeReplicaSet(t *testing.T) {
	for _, tc := range []struct {
		level Level
		n     int
		want  int
	}{
		{One, 3, 1}, {Majority, 1, 1}, {Majority, 2, 2}, {Majority, 3, 2}, {Majority, 4, 3}, {Majority, 5, 3}, {All, 3, 3},
	} {
		if got := tc.level.Quorum(tc.n); got != tc.want {
			t.Errorf("%v of %d replicas needs %d acknowledgements, want %d", tc.level, tc.n, got, tc.want)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	err := Config{Sync: true}.Validate()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Sync") {
		t.Fatalf("Sync without DataDir: %v, want ErrInvalidConfig naming Sync", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	if err := (Config{DataDir: "/var/lib/troupe", Sync: true}).Validate(); err != nil {
		t.Fatalf("DataDir with Sync: %v", err)
	}
	if err := Level(9).Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Level") {
		t.Fatalf("Level(9): %v, want ErrInvalidConfig naming Level", err)
	}
	if got := Level(9).String(); got != "Level(9)" {
		t.Fatalf("Level(9).String() = %q", got)
	}
}

func TestFormatErrorMatchesErrNewerFormat(t *testing.T) {
	var err error = &FormatError{Dir: "/d", Found: 3, Oldest: 1, Supported: 1}
	if !errors.Is(err, ErrNewerFormat) || errors.Is(err, ErrOlderFormat) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v should match ErrNewerFormat only", err)
	}
	if !strings.Contains(err.Error(), "format 3") || !strings.Contains(err.Error(), "up to 1") {
		t.Fatalf("the message %q should say both versions", err)
	}
}

func TestFormatErrorMatchesErrOlderFormat(t *testing.T) {
	var err error = &FormatError{Dir: "/d", Found: 1, Oldest: 2, Supported: 2}
	if !errors.Is(err, ErrOlderFormat) || errors.Is(err, ErrNewerFormat) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v should match ErrOlderFormat only", err)
	}
	if !strings.Contains(err.Error(), "format 1") || !strings.Contains(err.Error(), "from 2") {
		t.Fatalf("the message %q should say both versions", err)
	}
}
