package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allowed are the test doubles of time kept on purpose, by file and type.
var allowed = map[string]string{
	// The real clock without its waits, for benchmarks and the allocation
	// budget of retry's hot path: the kit's Sleep records every wait, which
	// would be measured.
	"internal/retry/bench_test.go": "instantClock",
}

// copies returns the fake clocks and log buffers declared in the test files
// under root, outside this package, as "path: type kind": a type with a
// Now() time.Time method is a clock; a type with a Write method and a
// bytes.Buffer or strings.Builder field is a log buffer.
func copies(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/testkit" || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		buffers := bufferTypes(f)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			recv := typeName(fn.Recv.List[0].Type)
			if allowed[rel] == recv {
				continue
			}
			switch {
			case isClockMethod(fn):
				found = append(found, rel+": "+recv+" clock")
			case fn.Name.Name == "Write" && buffers[recv]:
				found = append(found, rel+": "+recv+" log buffer")
			}
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

// isClockMethod reports whether fn is Now() time.Time or now() time.Time.
func isClockMethod(fn *ast.FuncDecl) bool {
	if fn.Name.Name != "Now" && fn.Name.Name != "now" || fn.Type.Params.NumFields() != 0 || fn.Type.Results.NumFields() != 1 {
		return false
	}
	sel, ok := fn.Type.Results.List[0].Type.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Time" && isIdent(sel.X, "time")
}

// bufferTypes returns the struct types of f with a bytes.Buffer or
// strings.Builder field.
func bufferTypes(f *ast.File) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, field := range st.Fields.List {
			if sel, ok := field.Type.(*ast.SelectorExpr); ok &&
				(isIdent(sel.X, "bytes") && sel.Sel.Name == "Buffer" || isIdent(sel.X, "strings") && sel.Sel.Name == "Builder") {
				out[ts.Name.Name] = true
			}
		}
		return true
	})
	return out
}

func typeName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// The tests of every package use this kit's clock and log buffer: a new
// copy in a test file fails here, naming it.
func TestNoOtherFakeClockOrLogBuffer(t *testing.T) {
	found := copies(t, filepath.Join("..", ".."))
	assert.Empty(t, found, "use testkit.Clock and testkit.Logs instead (or say in allowed why a copy must stay)")
}

func TestCopiesFound(t *testing.T) {
	tests := []struct {
		name, path, src string
		want            []string
	}{
		{"fake clock", "a/clock_test.go", `package a
import ("sync"; "time")
type fakeClock struct{ mu sync.Mutex; t time.Time }
func (c *fakeClock) Now() time.Time { return c.t }`, []string{"a/clock_test.go: fakeClock clock"}},
		{"unexported now", "b/p_test.go", `package b
import "time"
type clk struct{ t time.Time }
func (c clk) now() time.Time { return c.t }`, []string{"b/p_test.go: clk clock"}},
		{"log buffer", "c/l_test.go", `package c
import ("bytes"; "sync")
type syncBuffer struct{ mu sync.Mutex; b bytes.Buffer }
func (s *syncBuffer) Write(p []byte) (int, error) { return s.b.Write(p) }`, []string{"c/l_test.go: syncBuffer log buffer"}},
		{"a failing writer is no log buffer", "d/w_test.go", `package d
import "errors"
type broken struct{}
func (broken) Write(p []byte) (int, error) { return 0, errors.New("x") }`, nil},
		{"not a test file", "e/clock.go", `package e
import "time"
type c struct{}
func (c) Now() time.Time { return time.Now() }`, nil},
		{"allowed", "internal/retry/bench_test.go", `package retry
import "time"
type instantClock struct{}
func (instantClock) Now() time.Time { return time.Now() }`, nil},
		{"in the kit", "internal/testkit/x_test.go", `package testkit
import "time"
type c struct{}
func (c) Now() time.Time { return time.Now() }`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, filepath.FromSlash(tt.path))
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(tt.src), 0o644))
			got := copies(t, root)
			slices.Sort(got)
			assert.Equal(t, tt.want, got)
		})
	}
}
