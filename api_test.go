package ledger_test

import (
	"bufio"
	"bytes"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// publicPackages are the packages other modules import.
var publicPackages = []string{
	"github.com/agentledger/ledger",
	"github.com/agentledger/ledger/provider/anthropic",
	"github.com/agentledger/ledger/provider/openai",
	"github.com/agentledger/ledger/provider/gemini",
	"github.com/agentledger/ledger/ledgertest",
	"github.com/agentledger/ledger/metrics",
	"github.com/agentledger/ledger/gateway",
}

// No exported identifier of a public package exposes a type of an
// internal package: not in a signature, a field, a method, a constant's or
// a variable's type, however deep.
func TestNoInternalTypeExposed(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the public packages")
	}
	exports := exportData(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	for _, path := range publicPackages {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("importing %s: %v", path, err)
		}
		w := &walker{seen: map[types.Type]bool{}}
		for _, name := range pkg.Scope().Names() {
			obj := pkg.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			w.where = path + "." + name
			w.typ(obj.Type())
		}
		for _, leak := range w.leaks {
			t.Errorf("%s exposes an internal type: %s", path, leak)
		}
	}
}

// exportData maps every package the public ones depend on to its export
// data file, as the go command builds it.
func exportData(t *testing.T) map[string]string {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}, publicPackages...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if p, f, ok := strings.Cut(sc.Text(), " "); ok && f != "" {
			m[p] = f
		}
	}
	return m
}

type walker struct {
	where string
	seen  map[types.Type]bool
	leaks []string
}

func (w *walker) typ(t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if obj := t.Obj(); obj.Pkg() != nil && strings.Contains(obj.Pkg().Path(), "/internal/") {
			w.leaks = append(w.leaks, w.where+": "+t.String())
			return
		}
		if obj := t.Obj(); obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), "github.com/agentledger/ledger") {
			return // another module's type: its own business
		}
		for i := 0; i < t.NumMethods(); i++ {
			if m := t.Method(i); m.Exported() {
				w.typ(m.Type())
			}
		}
		for i := 0; i < t.TypeArgs().Len(); i++ {
			w.typ(t.TypeArgs().At(i))
		}
		if _, ok := t.Underlying().(*types.Signature); ok {
			// An option type's function signature is its API only by
			// name: its parameter is the unexported options struct.
			return
		}
		w.typ(t.Underlying())
	case *types.Pointer:
		w.typ(t.Elem())
	case *types.Slice:
		w.typ(t.Elem())
	case *types.Array:
		w.typ(t.Elem())
	case *types.Map:
		w.typ(t.Key())
		w.typ(t.Elem())
	case *types.Chan:
		w.typ(t.Elem())
	case *types.Signature:
		for i := 0; i < t.Params().Len(); i++ {
			w.typ(t.Params().At(i).Type())
		}
		for i := 0; i < t.Results().Len(); i++ {
			w.typ(t.Results().At(i).Type())
		}
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			if f := t.Field(i); f.Exported() {
				w.typ(f.Type())
			}
		}
	case *types.Interface:
		for i := 0; i < t.NumMethods(); i++ {
			w.typ(t.Method(i).Type())
		}
	}
}
