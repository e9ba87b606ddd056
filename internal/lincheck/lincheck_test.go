package lincheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/internal/lincheck"
)

// op builds an operation on a string-keyed register.
func op(key string, kind lincheck.Op, old, new int, out lincheck.Output, call, ret int64) porcupine.Operation {
	return porcupine.Operation{Input: lincheck.Input[string]{Key: key, Op: kind, Old: old, New: new}, Output: out, Call: call, Return: ret}
}

func check[K comparable](t *testing.T, ops []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	for i := range ops {
		ops[i].ClientId = i
	}
	return porcupine.CheckOperationsTimeout(lincheck.Model[K](), ops, 10*time.Second)
}

func TestALinearizableHistoryOfReadsWritesAndCompareAndSetsIsOk(t *testing.T) {
	ops := []porcupine.Operation{
		op("a", lincheck.Write, 0, 1, lincheck.Output{}, 0, 10),
		// Concurrent with the write: either value is fine.
		op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 5, 8),
		op("a", lincheck.CAS, 1, 2, lincheck.Output{OK: true}, 11, 20),
		op("a", lincheck.CAS, 1, 3, lincheck.Output{OK: false}, 21, 30),
		op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 2}, 31, 40),
		// Another key is another register: still 0.
		op("b", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 41, 50),
	}
	if res := check[string](t, ops); res != porcupine.Ok {
		t.Fatalf("a linearizable history checked %v, want Ok", res)
	}
}

func TestAnAnswerNoOrderExplainsIsIllegal(t *testing.T) {
	for _, tc := range []struct {
		name string
		last porcupine.Operation // after an acknowledged write of 1
	}{
		{"a stale read", op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 11, 20)},
		{"a compare-and-set refused on the value it expected", op("a", lincheck.CAS, 1, 2, lincheck.Output{OK: false}, 11, 20)},
		{"a compare-and-set applied on a value the register did not hold", op("a", lincheck.CAS, 0, 2, lincheck.Output{OK: true}, 11, 20)},
	} {
		ops := []porcupine.Operation{op("a", lincheck.Write, 0, 1, lincheck.Output{}, 0, 10), tc.last}
		if res := check[string](t, ops); res != porcupine.Illegal {
			t.Errorf("%s after an acknowledged write checked %v, want Illegal", tc.name, res)
		}
	}
}

func TestAnUnknownWriteMayTakeEffectLaterOrNever(t *testing.T) {
	unknown := lincheck.Output{Unknown: true}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a write seen late", []porcupine.Operation{
			op("a", lincheck.Write, 0, 7, unknown, 0, lincheck.Pending),
			op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 10, 20),
			op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 7}, 30, 40),
		}, porcupine.Ok},
		{"a write never seen", []porcupine.Operation{
			op("a", lincheck.Write, 0, 7, unknown, 0, lincheck.Pending),
			op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 30, 40),
		}, porcupine.Ok},
		{"a compare-and-set seen late", []porcupine.Operation{
			op("a", lincheck.Write, 0, 1, lincheck.Output{}, 0, 10),
			op("a", lincheck.CAS, 1, 2, lincheck.Output{OK: true, Unknown: true}, 11, lincheck.Pending),
			op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 2}, 30, 40),
		}, porcupine.Ok},
		{"a read of a value nobody wrote", []porcupine.Operation{
			op("a", lincheck.Write, 0, 7, unknown, 0, lincheck.Pending),
			op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 8}, 30, 40),
		}, porcupine.Illegal},
	} {
		if res := check[string](t, tc.ops); res != tc.want {
			t.Errorf("%s checked %v, want %v", tc.name, res, tc.want)
		}
	}
}

// A struct key, as a key's record of one kind: registers differ by any
// field, and the description prints the key with %v.
type record struct {
	key  string
	slot int
}

func (r record) String() string { return r.key + "/" + string(rune('0'+r.slot)) }

func TestRegistersArePartitionedByTheWholeKey(t *testing.T) {
	in := func(r record, kind lincheck.Op, new int) lincheck.Input[record] {
		return lincheck.Input[record]{Key: r, Op: kind, New: new}
	}
	a0, a1 := record{"a", 0}, record{"a", 1}
	ops := []porcupine.Operation{
		{Input: in(a0, lincheck.Write, 1), Output: lincheck.Output{}, Call: 0, Return: 10},
		{Input: in(a1, lincheck.Read, 0), Output: lincheck.Output{Value: 0}, Call: 11, Return: 20},
		{Input: in(a0, lincheck.Read, 0), Output: lincheck.Output{Value: 1}, Call: 21, Return: 30},
	}
	m := lincheck.Model[record]()
	parts := m.Partition(ops)
	if len(parts) != 2 || len(parts[0]) != 2 || len(parts[1]) != 1 || parts[1][0].Input.(lincheck.Input[record]).Key != a1 {
		t.Fatalf("partitioned into %v, want a/0's two operations, then a/1's one", parts)
	}
	if res := check[record](t, ops); res != porcupine.Ok {
		t.Fatalf("registers a/0 and a/1 checked %v, want Ok: a write to one is not seen in the other", res)
	}
	if got, want := m.DescribeOperation(ops[0].Input, ops[0].Output), "write a/0 1 (unknown false)"; got != want {
		t.Fatalf("described %q, want %q", got, want)
	}
}

func TestAHistoryRecordsConcurrentOperationsEachAsItsOwnClient(t *testing.T) {
	h := lincheck.NewHistory[string]()
	const clients, each = 4, 50
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				call := h.Now()
				h.Add(lincheck.Input[string]{Key: "k", Op: lincheck.Write, New: c*each + i + 1}, lincheck.Output{}, call, h.Now())
			}
		})
	}
	wg.Wait()
	ops := h.Ops()
	if len(ops) != clients*each {
		t.Fatalf("recorded %d operations, want %d", len(ops), clients*each)
	}
	for i, op := range ops {
		if op.ClientId != i {
			t.Fatalf("operation %d has client %d, want its own client %d", i, op.ClientId, i)
		}
		if op.Call > op.Return {
			t.Fatalf("operation %d returned at %d before its call at %d", i, op.Return, op.Call)
		}
	}
	if res := porcupine.CheckOperationsTimeout(lincheck.Model[string](), ops, 10*time.Second); res != porcupine.Ok {
		t.Fatalf("a history of writes alone checked %v, want Ok", res)
	}
}

func TestDrawWritesTheRejectedHistoryToATemporaryFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	ops := []porcupine.Operation{
		op("a", lincheck.Write, 0, 1, lincheck.Output{}, 0, 10),
		op("a", lincheck.Read, 0, 0, lincheck.Output{Value: 0}, 11, 20),
	}
	for i := range ops {
		ops[i].ClientId = i
	}
	res, info := porcupine.CheckOperationsVerbose(lincheck.Model[string](), ops, 10*time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("a stale read checked %v, want Illegal", res)
	}
	name, err := lincheck.Draw[string](info, "drawn-*.html")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(name) != dir || !strings.HasPrefix(filepath.Base(name), "drawn-") {
		t.Fatalf("drew into %s, want a drawn-* file in %s", name, dir)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "write a 1 (unknown false)") {
		t.Fatalf("the drawing does not describe the operations: %.300s", b)
	}
}
