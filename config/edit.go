package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/nerve-agents/nerve/internal/atomicfile"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// SetRemote adds or changes remotes.NAME.url in the nerve.yaml at path,
// keeping the rest of the file and its comments. The result is validated
// before it replaces the file, atomically.
func SetRemote(path, name, url string) error {
	return editFile(path, func(doc *yaml.Node) error {
		remotes := mappingAt(doc, "remotes", true)
		entry := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalar("url"), scalar(url)}}
		if i := keyIndex(remotes, name); i >= 0 {
			// The remote's other settings (repos) are the owner's: only
			// its url changes.
			if v := remotes.Content[i+1]; v.Kind == yaml.MappingNode {
				if j := keyIndex(v, "url"); j >= 0 {
					v.Content[j+1] = scalar(url)
				} else {
					v.Content = append(v.Content, scalar("url"), scalar(url))
				}
				entry = v
			}
			remotes.Content[i+1] = entry
		} else {
			remotes.Content = append(remotes.Content, scalar(name), entry)
		}
		remotes.Style = 0 // block style, even if it was written as {}
		return nil
	})
}

// AddRemote adds remotes.NAME with url to the nerve.yaml at path, as
// SetRemote does, but refuses with a *RemoteExistsError, leaving the file
// as it was, when the file already has a remote of that name (as `git
// remote add` does).
func AddRemote(path, name, url string) error {
	return editFile(path, func(doc *yaml.Node) error {
		remotes := mappingAt(doc, "remotes", true)
		if i := keyIndex(remotes, name); i >= 0 {
			e := &RemoteExistsError{Name: name}
			if v := remotes.Content[i+1]; v.Kind == yaml.MappingNode {
				if j := keyIndex(v, "url"); j >= 0 {
					e.URL = v.Content[j+1].Value
				}
			}
			return e
		}
		remotes.Content = append(remotes.Content, scalar(name), &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalar("url"), scalar(url)}})
		remotes.Style = 0
		return nil
	})
}

// RemoteExistsError is AddRemote's refusal: the name is taken.
type RemoteExistsError struct {
	Name string
	URL  string // what it is now, when the file says
}

func (e *RemoteExistsError) Error() string {
	if e.URL == "" {
		return fmt.Sprintf("remote %s already exists", e.Name)
	}
	return fmt.Sprintf("remote %s already exists (%s)", e.Name, e.URL)
}

// ExitCode: a taken name is a usage error (2).
func (e *RemoteExistsError) ExitCode() int { return 2 }

// RemoveRemote deletes remotes.NAME from the nerve.yaml at path. It
// reports false when there was no such remote.
func RemoveRemote(path, name string) (bool, error) {
	found := false
	err := editFile(path, func(doc *yaml.Node) error {
		remotes := mappingAt(doc, "remotes", false)
		if remotes == nil {
			return nil
		}
		if i := keyIndex(remotes, name); i >= 0 {
			remotes.Content = append(remotes.Content[:i], remotes.Content[i+2:]...)
			found = true
		}
		return nil
	})
	return found, err
}

// editFile applies edit to the YAML document of path under path's lock,
// so concurrent edits serialise instead of overwriting one another.
func editFile(path string, edit func(doc *yaml.Node) error) error {
	return atomicfile.WithLock(path, func() error { return editLocked(path, edit) })
}

func editLocked(path string, edit func(doc *yaml.Node) error) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlfile.SyntaxError(path, err)
	}
	if len(root.Content) == 0 {
		root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return &yamlfile.Error{File: path, Msg: "the top level must be a mapping"}
	}
	if err := edit(doc); err != nil {
		return err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return err
	}
	var probe Config
	if _, err := yamlfile.Decode(path, b.Bytes(), &probe); err != nil {
		return fmt.Errorf("refusing to write %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o600)
}

func mappingAt(doc *yaml.Node, key string, create bool) *yaml.Node {
	if i := keyIndex(doc, key); i >= 0 {
		v := doc.Content[i+1]
		if v.Kind == yaml.MappingNode {
			return v
		}
		if !create {
			return nil
		}
		// `remotes:` with no value is null: make it a mapping.
		m := &yaml.Node{Kind: yaml.MappingNode}
		doc.Content[i+1] = m
		return m
	}
	if !create {
		return nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	doc.Content = append(doc.Content, scalar(key), m)
	return m
}

func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// SetAgentName changes agent.name in the nerve.yaml at path, keeping the
// rest of the file and its comments, as SetRemote does.
func SetAgentName(path, name string) error {
	return editFile(path, func(doc *yaml.Node) error {
		agent := mappingAt(doc, "agent", true)
		if i := keyIndex(agent, "name"); i >= 0 {
			// The line's comment stays; !!str quotes a name YAML would
			// read as another type (null, 1e3).
			agent.Content[i+1].Value, agent.Content[i+1].Tag, agent.Content[i+1].Style = name, "!!str", 0
		} else {
			agent.Content = append(agent.Content, scalar("name"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name})
		}
		return nil
	})
}
