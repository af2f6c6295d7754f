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
	"regexp"
	"slices"
	"strings"
	"testing"
)

// publicPackages are the packages other modules import.
var publicPackages = []string{
	"github.com/agentledger/ledger",
	"github.com/agentledger/ledger/api",
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
	case *types.Alias:
		// type Usage = api.Usage is api.Usage: the type it stands for is
		// what the API exposes. (Another module's alias of its own
		// internal type, such as an SDK's option.RequestOption, is that
		// module's business.)
		if obj := t.Obj(); obj.Pkg() != nil && !strings.HasPrefix(obj.Pkg().Path(), "github.com/agentledger/ledger") {
			return
		}
		w.typ(types.Unalias(t))
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

// modulePackages lists the module's packages (tests and commands
// included) with go list: import path, package name and imports.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \",\"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		p := listedPackage{path: f[0], name: f[1]}
		if len(f) == 3 {
			p.imports = strings.Split(f[2], ",")
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

type listedPackage struct {
	path, name string
	imports    []string
}

func isInternal(path string) bool { return strings.Contains(path, "/internal/") }

// go doc shows no internal package: no internal/ path and no identifier
// qualified by the name of an internal package (an alias of an internal
// type is rendered "type Usage = events.Usage", which a user can neither
// import nor read the fields of).
func TestGoDocNamesNoInternalPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc on every public package")
	}
	internal, public := map[string]bool{}, map[string]bool{}
	for _, p := range modulePackages(t) {
		if isInternal(p.path) {
			internal[p.name] = true
		} else {
			public[p.name] = true
		}
	}
	var names []string
	for n := range internal {
		if !public[n] { // a name public packages share says nothing
			names = append(names, regexp.QuoteMeta(n))
		}
	}
	slices.Sort(names)
	qualified := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\.[A-Z]`)
	for _, path := range publicPackages {
		out, err := exec.Command("go", "doc", "-all", path).CombinedOutput()
		if err != nil {
			t.Fatalf("go doc -all %s: %v\n%s", path, err, out)
		}
		for i, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "internal/") || qualified.MatchString(line) {
				t.Errorf("go doc -all %s, line %d names an internal package: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// The import arrows run down only: no internal package imports a public
// one but api, the leaf the public types are declared in (which imports
// nothing of the module), so that no internal package depends on the
// root package that is built on it.
func TestInternalImportsNoPublicPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the module's packages")
	}
	const module, leaf = "github.com/agentledger/ledger", "github.com/agentledger/ledger/api"
	for _, p := range modulePackages(t) {
		for _, imp := range p.imports {
			inModule := imp == module || strings.HasPrefix(imp, module+"/")
			switch {
			case p.path == leaf && inModule:
				t.Errorf("%s imports %s: it must import nothing of the module", p.path, imp)
			case isInternal(p.path) && inModule && !isInternal(imp) && imp != leaf:
				t.Errorf("%s imports the public package %s: an arrow that runs back up", p.path, imp)
			}
		}
	}
}
