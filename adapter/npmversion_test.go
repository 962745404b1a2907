package adapter

import (
	"os"
	"path/filepath"
	"testing"
)

// An npm-installed CLI's version comes from its package's package.json,
// scoped or not, whatever depth its entry file has; a binary outside
// node_modules has none.
func TestNPMVersion(t *testing.T) {
	root := filepath.Join(t.TempDir(), "node_modules")
	write := func(rel, content string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, target string) string {
		p := filepath.Join(root, ".bin", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("@scope/tool/package.json", `{"name":"@scope/tool","version":"1.2.3"}`, 0o644)
	write("@scope/tool/dist/bin/cli.js", "#!/usr/bin/env node\n", 0o755)
	write("plain/package.json", `{"name":"plain","version":"0.9.0"}`, 0o644)
	write("plain/bin/plain", "#!/bin/sh\n", 0o755)
	write("broken/package.json", `{"name":"broken"}`, 0o644)
	write("broken/cli.js", "#!/bin/sh\n", 0o755)
	for _, c := range []struct {
		bin, want string
		ok        bool
	}{
		{link("tool", "../@scope/tool/dist/bin/cli.js"), "@scope/tool 1.2.3", true},
		{link("plain", "../plain/bin/plain"), "plain 0.9.0", true},
		{link("broken", "../broken/cli.js"), "", false},
		{write("../elsewhere/tool", "#!/bin/sh\n", 0o755), "", false},
		{filepath.Join(root, ".bin", "missing"), "", false},
	} {
		if got, ok := npmVersion(c.bin); got != c.want || ok != c.ok {
			t.Errorf("npmVersion(%s) = %q, %v; want %q, %v", c.bin, got, ok, c.want, c.ok)
		}
	}
}
