// Package apisurface holds the test that keeps Troupe's public packages
// small and free of internal types.
package apisurface

import (
	"go/importer"
	"go/token"
	"go/types"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/troupe-go/troupe/"

// limits is how many exported identifiers each public package may have,
// counting each exported method of an exported type (the package's own
// methods and those promoted from embedded fields).
var limits = map[string]int{
	"actor":              0, // the typed API: no limit, but no internal types either
	"system":             50,
	"client":             50,
	"client/idempotency": 50,
	"cluster":            50,
	"wire":               50,
	"ring":               50,
	"replication":        50,
	// The record with its limits and errors, the ordering rule, the
	// timings and the store contract that backends in other modules
	// (etcdrecords) implement, and the checks of a record's fields that a
	// member's config and the API's filters share: one model, kept in one
	// package.
	"noderecord":            72,
	"noderecord/recordtest": 50,
}

func TestPublicPackagesAreSmallAndShowNoInternalTypes(t *testing.T) {
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil).(types.ImporterFrom)
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		pkg, err := imp.ImportFrom(module+name, ".", 0)
		if err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		ids, leaks := surface(pkg)
		if max := limits[name]; max > 0 && len(ids) > max {
			t.Errorf("package %s exports %d identifiers, more than %d:\n\t%s", name, len(ids), max, strings.Join(ids, "\n\t"))
		}
		for _, l := range leaks {
			t.Errorf("package %s: %s", name, l)
		}
	}
}

// surface lists pkg's exported identifiers and every place where one of
// them mentions a type of an internal package.
func surface(pkg *types.Package) (ids, leaks []string) {
	scope := pkg.Scope()
	for _, n := range scope.Names() {
		obj := scope.Lookup(n)
		if !obj.Exported() {
			continue
		}
		ids = append(ids, n)
		if internal(obj.Type(), map[types.Type]bool{}, obj, true) {
			leaks = append(leaks, n+" mentions an internal type: "+types.ObjectString(obj, nil))
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			continue
		}
		for _, recv := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
			ms := types.NewMethodSet(recv)
			for i := range ms.Len() {
				m := ms.At(i).Obj()
				if !m.Exported() {
					continue
				}
				id := n + "." + m.Name()
				if _, ptr := recv.(*types.Pointer); ptr && types.NewMethodSet(tn.Type()).Lookup(m.Pkg(), m.Name()) != nil {
					continue // listed with the value receiver
				}
				ids = append(ids, id)
				if internal(m.Type(), map[types.Type]bool{}, m, false) {
					leaks = append(leaks, id+" mentions an internal type: "+types.ObjectString(m, nil))
				}
			}
		}
	}
	return ids, leaks
}

// internal reports whether t, as a user sees it, names a type declared in
// an internal package: in a signature, an exported field, an interface's
// exported methods, a type argument. top marks the declared type itself,
// whose own name is in a public package.
func internal(t types.Type, seen map[types.Type]bool, obj types.Object, top bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		if isInternal(t.Obj().Pkg()) {
			return true
		}
		return internal(types.Unalias(t), seen, obj, false)
	case *types.Named:
		if isInternal(t.Obj().Pkg()) {
			return true
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				if internal(args.At(i), seen, obj, false) {
					return true
				}
			}
		}
		if top {
			return internal(t.Underlying(), seen, obj, false)
		}
		return false
	case *types.Pointer:
		return internal(t.Elem(), seen, obj, false)
	case *types.Slice:
		return internal(t.Elem(), seen, obj, false)
	case *types.Array:
		return internal(t.Elem(), seen, obj, false)
	case *types.Map:
		return internal(t.Key(), seen, obj, false) || internal(t.Elem(), seen, obj, false)
	case *types.Chan:
		return internal(t.Elem(), seen, obj, false)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tup.Len() {
				if internal(tup.At(i).Type(), seen, obj, false) {
					return true
				}
			}
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() && internal(f.Type(), seen, obj, false) {
				return true
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() && internal(m.Type(), seen, obj, false) {
				return true
			}
		}
	}
	return false
}

func isInternal(p *types.Package) bool {
	return p != nil && strings.Contains(p.Path()+"/", "/internal/")
}
