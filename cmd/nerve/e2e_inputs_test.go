package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeLine is the one line of README.md that contains marker.
func readmeLine(t *testing.T, marker string) string {
	t.Helper()
	src, err := os.ReadFile(repoFile(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, marker) {
			found = append(found, strings.TrimSpace(l))
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md: %d lines contain %q, want 1: %q", len(found), marker, found)
	}
	return found[0]
}

// shell runs line with sh in the repository's root, the real nerve first
// on PATH, as a user runs a README command in a clone.
func (e *env) shell(line string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home, "HOME="+e.home, "PATH="+filepath.Dir(nerveBin(e.t))+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, e.extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("sh -c %q: %v", line, err)
	}
	return result{out.String(), errb.String(), code}
}

// The README's fan-out command runs as written: an array input is JSON on
// the command line. A value that is not JSON says so, with a hint.
func TestE2EArrayInputFromTheCommandLine(t *testing.T) {
	e := newEnv(t)
	line := readmeLine(t, "workflow run examples/fan-out.yaml")
	r := e.shell(line)
	if r.code != 0 || !strings.Contains(r.stdout, `"reviews": 2`) || !strings.Contains(r.stderr, "completed after 3 steps") {
		t.Fatalf("%s: %s", line, r)
	}
	fanOut := repoFile(t, "examples/fan-out.yaml")
	r = e.must(2, "workflow", "run", fanOut, "-i", "changes=Add retries, Drop the cache")
	want := `nerve: workflow fan-out: input "changes" must be of type array, and "Add retries, Drop the cache" is not JSON` + "\n" +
		`hint: write it as JSON, e.g. --input changes='["a", "b"]', or give the inputs in --input-file FILE.yaml` + "\n"
	if r.stderr != want || r.stdout != "" {
		t.Fatalf("want stderr %q, got %s", want, r)
	}
	// JSON of another type is the type's error, as before.
	r = e.must(2, "workflow", "run", fanOut, "-i", `changes={"a": 1}`)
	if !strings.HasPrefix(r.stderr, `nerve: workflow fan-out: input "changes" must be of type array, got {"a":1}`+"\n") {
		t.Fatalf("an object for an array: %s", r)
	}
	// --input-file takes it as YAML.
	e.write("in.yaml", "changes: [Add retries]\n")
	r = e.must(0, "workflow", "run", fanOut, "--input-file", filepath.Join(e.home, "in.yaml"), "--json")
	if !strings.Contains(r.stdout, `"reviews":1`) {
		t.Fatalf("--input-file: %s", r)
	}
}

// On a Khala the same: the server reads the JSON, and its refusal of a
// value that is not JSON comes with the same hint, exit 2.
func TestE2EArrayInputRemote(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {name: pusher}\nremotes:\n  origin: {url: \""+k.url+"\"}\n")
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	e.must(0, "workflow", "push", repoFile(t, "examples/fan-out.yaml"), "origin")
	r := e.must(2, "workflow", "run", "origin/fan-out", "-i", "changes=a,b")
	want := `nerve: remote origin: workflow fan-out: input "changes" must be of type array, and "a,b" is not JSON` + "\n" +
		`hint: write it as JSON, e.g. --input changes='["a", "b"]', or give the inputs in --input-file FILE.yaml` + "\n"
	if r.stderr != want {
		t.Fatalf("want stderr %q, got %s", want, r)
	}
	r = e.must(0, "workflow", "run", "origin/fan-out", "-i", `changes=["a","b"]`, "--detach")
	if !strings.HasPrefix(r.stdout, "origin/fan-out#thread-") {
		t.Fatalf("run with a JSON array: %s", r)
	}
}
