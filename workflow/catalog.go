package workflow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// Entry is one definition file found in a workflow directory.
type Entry struct {
	Name string
	File string
	Def  *Definition
	Err  error // the file does not parse; Name is the file's base name
}

// NotFoundError is an unknown workflow: a usage error.
type NotFoundError struct {
	Name  string
	Known []string
	Dirs  []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("unknown workflow %q", e.Name)
}
func (e *NotFoundError) ExitCode() int { return 2 }
func (e *NotFoundError) Hint() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("no workflows in %s; add a definition there or give a file: nerve workflow run ./my-workflow.yaml", strings.Join(e.Dirs, ", "))
	}
	return "known workflows: " + strings.Join(e.Known, ", ")
}

// Discover parses every *.yaml and *.yml file in dirs (missing directories
// are skipped). Entries are sorted by name; a name defined twice keeps the
// first directory's and reports the other as an error.
func Discover(dirs []string) []Entry { return discover(dirs, parseOptions{}) }

// List is Discover for showing definitions, not running them: the roles'
// meta schemas are not compiled (Role.Schema is nil), so it is fast.
func List(dirs []string) []Entry { return discover(dirs, parseOptions{light: true}) }

func discover(dirs []string, o parseOptions) []Entry {
	var out []Entry
	seen := map[string]string{}
	for _, dir := range dirs {
		files, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				out = append(out, Entry{Name: filepath.Base(dir), File: dir, Err: err})
			}
			continue
		}
		for _, f := range files {
			ext := filepath.Ext(f.Name())
			if f.IsDir() || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			path := filepath.Join(dir, f.Name())
			d, err := loadFile(path, o)
			if err != nil {
				out = append(out, Entry{Name: strings.TrimSuffix(f.Name(), ext), File: path, Err: err})
				continue
			}
			if prev, dup := seen[d.Name]; dup {
				out = append(out, Entry{Name: d.Name, File: path, Err: &yamlfile.Error{File: path, Line: d.nameLine, Field: "workflow",
					Msg: fmt.Sprintf("%q is already the name of %s; rename one of them", d.Name, prev)}})
				continue
			}
			seen[d.Name] = path
			out = append(out, Entry{Name: d.Name, File: path, Def: d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Find returns the definition named name from dirs. A definition that
// exists but does not parse returns its parse error.
func Find(dirs []string, name string) (*Definition, error) {
	var known []string
	var parseErr error
	for _, e := range Discover(dirs) {
		if e.Def != nil {
			if e.Name == name {
				return e.Def, nil
			}
			known = append(known, e.Name)
		} else if e.Name == name && parseErr == nil {
			parseErr = e.Err
		}
	}
	if parseErr != nil {
		return nil, parseErr
	}
	return nil, &NotFoundError{Name: name, Known: known, Dirs: dirs}
}

// IsFileRef reports whether a workflow argument names a definition file
// rather than a ref: it ends in .yaml or .yml.
func IsFileRef(s string) bool {
	return strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}
