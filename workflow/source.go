package workflow

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// inlineModerator returns the definition's YAML with its moderator field
// holding the expression itself, so the definition stands alone: a thread
// resumes from it and `workflow push` publishes it.
func inlineModerator(data []byte, src string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("definition is not a mapping")
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "moderator" {
			m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: src, Style: yaml.LiteralStyle}
		}
	}
	return yaml.Marshal(&root)
}

// ParseSource parses a definition whose moderator is inline, sent whole
// to be published (PUT /v1/workflows/{name}): checked as a file is.
func ParseSource(name string, src []byte) (*Definition, error) {
	return Parse(name, src, nil)
}

// ParseStored parses a definition kept since it was accepted: a thread's
// copy, or one a Khala server published. Rules added since (0 refused as a
// limit, an input default of another type) are not applied, so a thread
// started under an older nerve still resumes and answers: such a 0 takes
// its default, as it did, and such an input default stays as written.
func ParseStored(name string, src []byte) (*Definition, error) {
	return parse(name, src, nil, parseOptions{stored: true})
}

// CloudSource returns the definition as published to a Khala server:
// moderator inlined, binding cloud, and no adapters, since which CLI plays
// a role is each machine owner's choice (their reflexes), not the
// workflow's. A workspace repo that only this machine can reach (a local
// path) is dropped too: each cloud run then names its repository.
func (d *Definition) CloudSource() ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(d.Source, &root); err != nil {
		return nil, err
	}
	m := root.Content[0]
	hasBinding := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "binding":
			m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Value: BindingCloud}
			hasBinding = true
		case "workspace":
			dropLocalRepo(m.Content[i+1])
		case "roles":
			for _, role := range m.Content[i+1].Content {
				if role.Kind != yaml.MappingNode {
					continue
				}
				for j := 0; j+1 < len(role.Content); j += 2 {
					if role.Content[j].Value == "adapter" {
						role.Content = append(role.Content[:j], role.Content[j+2:]...)
						break
					}
				}
			}
		}
	}
	if !hasBinding {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "binding"},
			&yaml.Node{Kind: yaml.ScalarNode, Value: BindingCloud})
	}
	return yaml.Marshal(&root)
}

// dropLocalRepo removes a workspace mapping's repo when no other machine
// could reach it.
func dropLocalRepo(ws *yaml.Node) {
	if ws.Kind != yaml.MappingNode {
		return
	}
	for j := 0; j+1 < len(ws.Content); j += 2 {
		if ws.Content[j].Value == "repo" && CheckSharedRepo(ws.Content[j+1].Value) != nil {
			ws.Content = append(ws.Content[:j], ws.Content[j+2:]...)
			return
		}
	}
}
