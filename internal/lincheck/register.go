package lincheck

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// Op is what a register operation does.
type Op uint8

const (
	// Read returns the register's value.
	Read Op = iota
	// Write sets the register to Input.New.
	Write
	// CAS sets the register to Input.New if it holds Input.Old.
	CAS
)

func (o Op) String() string {
	switch o {
	case Read:
		return "read"
	case Write:
		return "write"
	case CAS:
		return "cas"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Input is an operation as its client called it, on the register of Key.
type Input[K comparable] struct {
	Key K
	Op  Op
	// Old is the value a compare-and-set expects, New the value a write
	// or compare-and-set stores.
	Old, New int
}

// Output is what the client learnt of an operation.
type Output struct {
	// Value is what a read returned.
	Value int
	// OK reports whether a compare-and-set applied.
	OK bool
	// Unknown marks an operation whose outcome the client never learnt:
	// it may take effect at any time after its call, or never.
	Unknown bool
}

// Pending is the Return of an operation whose outcome is unknown, so
// that it overlaps everything called after it.
const Pending int64 = math.MaxInt64

// Model returns porcupine's model of one integer register per key of type
// K. Partition keeps the keys in the order they first appear, so a
// report of the first illegal partition is the same from run to run.
// DescribeOperation prints keys with %v.
func Model[K comparable]() porcupine.Model {
	return porcupine.Model{
		Partition: partition[K],
		Init:      func() any { return 0 },
		Step: func(state, input, output any) (bool, any) {
			return step(state.(int), input.(Input[K]), output.(Output))
		},
		DescribeOperation: func(input, output any) string {
			return describe(input.(Input[K]), output.(Output))
		},
	}
}

func partition[K comparable](h []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[K][]porcupine.Operation{}
	var order []K
	for _, op := range h {
		k := op.Input.(Input[K]).Key
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	return out
}

// step applies one operation to a register holding st: whether the
// output is possible there, and the value after it.
func step[K comparable](st int, in Input[K], out Output) (bool, int) {
	switch in.Op {
	case Read:
		return out.Value == st, st
	case Write:
		return true, in.New
	}
	switch {
	case out.Unknown && st == in.Old:
		return true, in.New
	case out.Unknown:
		return true, st
	case out.OK:
		return st == in.Old, in.New
	}
	return st != in.Old, st
}

func describe[K comparable](in Input[K], out Output) string {
	switch in.Op {
	case Read:
		return fmt.Sprintf("read %v -> %d", in.Key, out.Value)
	case Write:
		return fmt.Sprintf("write %v %d (unknown %v)", in.Key, in.New, out.Unknown)
	}
	return fmt.Sprintf("cas %v %d->%d: %v (unknown %v)", in.Key, in.Old, in.New, out.OK, out.Unknown)
}
