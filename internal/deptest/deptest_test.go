package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nerve-agents/nerve"

// pkg is what `go list -json` says of one of the module's packages.
type pkg struct {
	ImportPath   string
	Name         string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string // direct, non-test
	Deps         []string // everything linked, transitively
}

// graph lists the module's packages, without their tests.
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := goOutput("list", "-json=ImportPath,Name,Dir,GoFiles,TestGoFiles,XTestGoFiles,Imports,Deps", module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// goOutput runs the go command and returns its stdout; its error carries
// what go printed on stderr, which says why (a module it could not
// download, a file that does not compile), not just "exit status 1".
func goOutput(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// own names a dependency by its path in the module ("" for others).
func own(dep string) string {
	if dep == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(dep, module+"/"); ok {
		return rest
	}
	return ""
}

// under reports whether p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func TestKhalaLinksNoDaemonParts(t *testing.T) {
	banned := []string{"github.com/spf13/viper", "github.com/fsnotify/fsnotify", module + "/config", module + "/adapter"}
	for name, p := range graph(t) {
		if !under(name, "khala") {
			continue
		}
		for _, dep := range p.Deps {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s links %s: the Khala server must not carry the daemon's config loader or adapters", name, dep)
				}
			}
		}
	}
}

func TestNothingImportsCmd(t *testing.T) {
	for name, p := range graph(t) {
		for _, dep := range p.Imports {
			if under(own(dep), "cmd") {
				t.Errorf("%s imports %s: commands are the top of the graph", name, dep)
			}
		}
	}
}

// flow is the direction data takes; a package links none before it.
var flow = []string{"cmd/nerve", "daemon", "sense", "reflex", "workflow", "adapter"}

func TestFlowRunsOneWay(t *testing.T) {
	pkgs := graph(t)
	for i, name := range flow {
		p, ok := pkgs[name]
		if !ok {
			t.Fatalf("package %s is gone; update the flow", name)
		}
		for _, earlier := range flow[:i] {
			if slices.Contains(p.Deps, module+"/"+earlier) {
				t.Errorf("%s links %s: the flow %s runs the other way", name, earlier, strings.Join(flow, " → "))
			}
		}
	}
}

// TestLeafTypes keeps shared types in leaf packages: the thread engine,
// the Khala client and server, and the store do not reach into the
// adapters, the config loader or the client.
func TestLeafTypes(t *testing.T) {
	pkgs := graph(t)
	rules := map[string][]string{
		"workflow": {"adapter", "config"},
		"remote":   {"adapter", "config"},
		"khala":    {"adapter", "config"},
		"store":    {"remote"},
	}
	for name, banned := range rules {
		for _, dep := range pkgs[name].Deps {
			if slices.Contains(banned, own(dep)) {
				t.Errorf("%s links %s", name, own(dep))
			}
		}
	}
	for name, p := range pkgs {
		if !under(name, "internal") || name == "internal/deptest" {
			continue
		}
		for _, dep := range p.Imports {
			if d := own(dep); d != "" && !under(d, "internal") {
				t.Errorf("leaf package %s imports %s", name, d)
			}
		}
	}
}

// TestConsoleLinksNoHost keeps the web console below both of its hosts:
// Khala and `nerve console` (over the daemon's socket) mount it, so it
// links neither of them, nor what Khala must not carry.
func TestConsoleLinksNoHost(t *testing.T) {
	pkgs := graph(t)
	p, ok := pkgs["console"]
	if !ok {
		t.Fatal("package console is gone; update this test")
	}
	banned := []string{"khala", "daemon", "config", "adapter", "cmd", "store", "sense", "reflex", "remote", "mcp"}
	for _, dep := range p.Deps {
		for _, b := range banned {
			if under(own(dep), b) {
				t.Errorf("console links %s: it is mounted by Khala and by nerve console, and links neither host", own(dep))
			}
		}
		if strings.HasPrefix(dep, "github.com/spf13/viper") || strings.HasPrefix(dep, "github.com/fsnotify/fsnotify") {
			t.Errorf("console links %s", dep)
		}
	}
	if !slices.Contains(pkgs["khala"].Imports, module+"/console") {
		t.Error("khala no longer mounts the console; update this test")
	}
}

// TestKhalaStorageLayers keeps Khala's storage split the way River splits
// its drivers: the contract (khala/khaladb) and its test suite link no
// backend, a backend links neither the server nor another backend, and
// nothing under khaladb links the server (package khala).
func TestKhalaStorageLayers(t *testing.T) {
	pkgs := graph(t)
	backends := []string{"khala/khaladb/khalabolt", "khala/khaladb/khalapg"}
	for name, p := range pkgs {
		if !under(name, "khala/khaladb") {
			continue
		}
		for _, dep := range p.Deps {
			d := own(dep)
			switch {
			case d == "khala" || d == "khala/api":
				t.Errorf("%s links %s: storage does not know the server", name, d)
			case slices.Contains(backends, d) && !under(name, d):
				t.Errorf("%s links the backend %s: only the server opens backends", name, d)
			}
		}
	}
	for _, b := range backends {
		if _, ok := pkgs[b]; !ok {
			t.Errorf("backend package %s is gone; update this test", b)
		}
	}
}

// TestKhalaEngineIsNoServer keeps the thread engine (khala/engine) a
// function of its storage: it speaks no HTTP (package khala is its shell)
// and links no backend (whoever serves opens one), nor the server, the
// daemon, its config loader or the adapters. net/http is checked among
// its own imports: the workflow package below it links it.
func TestKhalaEngineIsNoServer(t *testing.T) {
	pkgs := graph(t)
	banned := []string{"khala/khaladb/khalabolt", "khala/khaladb/khalapg", "daemon", "config", "adapter"}
	found := false
	for name, p := range pkgs {
		if !under(name, "khala/engine") {
			continue
		}
		found = true
		for _, dep := range p.Imports {
			if dep == "net/http" || strings.HasPrefix(dep, "net/http/") {
				t.Errorf("%s imports %s: the engine speaks no HTTP; package khala maps its errors to statuses", name, dep)
			}
		}
		for _, dep := range p.Deps {
			d := own(dep)
			if d == "khala" || slices.ContainsFunc(banned, func(b string) bool { return under(d, b) }) {
				t.Errorf("%s links %s: the engine sees khaladb.Storage alone, and no daemon part", name, d)
			}
		}
	}
	if !found {
		t.Error("package khala/engine is gone; update this test")
	}
}

// TestEveryPackageHasDocGo keeps each package's comment where a reader
// looks for it first.
func TestEveryPackageHasDocGo(t *testing.T) {
	for name, p := range graph(t) {
		if len(p.GoFiles) > 0 && !slices.Contains(p.GoFiles, "doc.go") {
			t.Errorf("package %s (%s) has no doc.go", name, p.Dir)
		}
	}
}

// TestOTelInOnePlace keeps the OpenTelemetry SDK and its exporter behind
// internal/telemetry: the daemon, Khala and the client call its few hooks,
// which cost nothing when no endpoint is set, and none of them touches
// the SDK, so it can change (or go) in one package.
func TestOTelInOnePlace(t *testing.T) {
	pkgs := graph(t)
	tel, ok := pkgs["internal/telemetry"]
	if !ok {
		t.Fatal("package internal/telemetry is gone; update this test")
	}
	if !slices.ContainsFunc(tel.Imports, func(d string) bool { return strings.HasPrefix(d, "go.opentelemetry.io/otel/sdk") }) {
		t.Fatal("internal/telemetry no longer imports the OTel SDK; update this test")
	}
	for name, p := range pkgs {
		if name == "internal/telemetry" {
			continue
		}
		for _, dep := range p.Imports {
			if strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("%s imports %s: OpenTelemetry is internal/telemetry's business", name, dep)
			}
		}
	}
}

// TestNoProtobufRuntimeInTheBinary keeps the protobuf runtime and gRPC out
// of nerve: their package initialisation runs in every process, the CLI's
// quickest commands included (internal/telemetry encodes OTLP itself).
func TestNoProtobufRuntimeInTheBinary(t *testing.T) {
	p, ok := graph(t)["cmd/nerve"]
	if !ok {
		t.Fatal("package cmd/nerve is gone; update this test")
	}
	for _, dep := range p.Deps {
		if strings.HasPrefix(dep, "google.golang.org/grpc") || strings.HasPrefix(dep, "google.golang.org/protobuf") {
			t.Errorf("nerve links %s: its initialisation would slow every command", dep)
		}
	}
}
