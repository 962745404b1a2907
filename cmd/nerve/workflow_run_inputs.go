package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseInputs merges --input-file (a JSON or YAML object) and --input
// NAME=VALUE pairs (VALUE @path reads a file; later wins).
func parseInputs(pairs []string, file string) (map[string]any, error) {
	in := map[string]any{}
	if file != "" {
		var err error
		if in, err = readInputFile(file); err != nil {
			return nil, err
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErrorf("write --input NAME=VALUE", "bad --input %q", p)
		}
		if strings.HasPrefix(v, "@") {
			raw, err := os.ReadFile(v[1:])
			if err != nil {
				return nil, usageErrorf(atFileHint(k, v[1:]), "--input %s: %s: %v", k, v[1:], pathErr(err))
			}
			v = string(raw)
		}
		in[k] = v
	}
	return in, nil
}

// atFileHint says what --input NAME=@FILE did with a file it could not
// read, and how to pass text that begins with @.
func atFileHint(name, file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = file
	}
	return fmt.Sprintf("--input %s=@FILE reads FILE, here %s; to pass text that begins with @, give it in --input-file", name, abs)
}

// pathErr is err without the path its message would repeat.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

const inputFileHint = `write one object of input names to values, e.g. {"change": "Add retries"}`

// readInputFile reads --input-file: one JSON or YAML object of input
// names to values.
func readInputFile(file string) (map[string]any, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, usageErrorf("", "input file %s: %v", file, pathErr(err))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, usageErrorf(inputFileHint, "input file %s is empty; it must hold an object of input names to values", file)
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, usageErrorf(inputFileHint, "input file %s is not valid JSON or YAML: %s", file, strings.TrimPrefix(firstLine(err.Error()), "yaml: "))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, usageErrorf(inputFileHint, "input file %s holds %s; it must hold an object of input names to values", file, valueKind(v))
	}
	// Values go to the daemon as JSON: make them JSON's (nested YAML
	// mappings with non-string keys, or .nan, have no JSON form).
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, usageErrorf(inputFileHint, "input file %s holds a value JSON cannot carry (a mapping key that is not a string, or .nan or .inf)", file)
	}
	in := map[string]any{}
	return in, json.Unmarshal(b, &in)
}

// valueKind names what a decoded JSON or YAML document is, for a user
// who gave the wrong one.
func valueKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case map[any]any:
		return "a mapping whose keys are not all strings"
	}
	return "a single value"
}

// workflowFileHint says where to look when a definition file given to
// `workflow run` does not exist: the definitions beside where it was
// looked for, and the workflows known by name.
func workflowFileHint(path string) string {
	const byName = "'nerve workflow list' shows the workflows you can run by name"
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		cwd, _ := os.Getwd()
		return fmt.Sprintf("there is no directory %s in %s; %s", dir, cwd, byName)
	}
	var defs []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			defs = append(defs, n)
		}
	}
	if len(defs) == 0 {
		return fmt.Sprintf("%s has no definition (.yaml); %s", dir, byName)
	}
	slices.Sort(defs)
	if len(defs) > 8 {
		defs = append(defs[:8], "…")
	}
	return fmt.Sprintf("%s has %s; %s", dir, strings.Join(defs, ", "), byName)
}
