package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTestedPackageHasATestHome keeps every test away from the
// user's HOME and NERVE_HOME: a package with tests has a TestMain that
// calls testhome.Main or testhome.Run (internal/testhome), which moves
// HOME, NERVE_HOME and the XDG directories into a temporary directory.
// Without it, a test that runs nerve reads the developer's ~/.nerve.
func TestEveryTestedPackageHasATestHome(t *testing.T) {
	checked := 0
	for name, p := range graph(t) {
		files := append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...)
		if len(files) == 0 {
			continue
		}
		checked++
		if !callsTestHome(t, p, files) {
			t.Errorf("package %s (%s) has tests but no TestMain calling testhome.Main(m) or testhome.Run(m): "+
				"its tests would see the user's HOME and NERVE_HOME; add\n\tfunc TestMain(m *testing.M) { testhome.Main(m) }", name, p.Dir)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages with tests found", checked)
	}
}

// callsTestHome reports whether one of files declares a TestMain whose body
// calls testhome.Main or testhome.Run (Main or Run inside testhome itself).
func callsTestHome(t *testing.T, p pkg, files []string) bool {
	t.Helper()
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "TestMain" || fn.Body == nil {
				continue
			}
			found := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch f := call.Fun.(type) {
				case *ast.SelectorExpr:
					x, ok := f.X.(*ast.Ident)
					found = found || ok && x.Name == "testhome" && (f.Sel.Name == "Main" || f.Sel.Name == "Run")
				case *ast.Ident:
					found = found || p.Name == "testhome" && (f.Name == "Main" || f.Name == "Run")
				}
				return !found
			})
			if found {
				return true
			}
		}
	}
	return false
}

// A go command that fails says why in the test's failure, not only
// "exit status 1".
func TestGoOutputShowsGoStderr(t *testing.T) {
	_, err := goOutput("list", module+"/no/such/package")
	if err == nil {
		t.Fatal("go list of a package that does not exist succeeded")
	}
	first, stderr, _ := strings.Cut(err.Error(), "\n")
	if !strings.Contains(first, "exit status") || !strings.Contains(stderr, "no/such/package") {
		t.Fatalf("the error does not carry go's stderr: %q", err)
	}
}
