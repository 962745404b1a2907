package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// npmVersion is "NAME VERSION" of the npm package a binary belongs to: npm
// links node_modules/.bin/NAME to a file inside its package, whose
// package.json is in that file's directory or one of the few above it.
func npmVersion(binary string) (string, bool) {
	real, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return "", false
	}
	dir := filepath.Dir(real)
	for range 4 {
		if filepath.Base(filepath.Dir(dir)) == "node_modules" || filepath.Base(filepath.Dir(filepath.Dir(dir))) == "node_modules" {
			if v, ok := packageVersion(filepath.Join(dir, "package.json")); ok {
				return v, true
			}
		}
		dir = filepath.Dir(dir)
	}
	return "", false
}

// packageVersion reads a package.json's name and version.
func packageVersion(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1<<20 {
		return "", false
	}
	var p struct{ Name, Version string }
	if json.Unmarshal(b, &p) != nil || p.Name == "" || p.Version == "" {
		return "", false
	}
	return p.Name + " " + p.Version, true
}
