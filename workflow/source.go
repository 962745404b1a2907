package workflow

import (
	"fmt"

	"gopkg.in/yaml.v3"
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

// ParseSource parses a definition whose moderator is inline (a thread's
// stored copy, or one pushed to a Khala server).
func ParseSource(name string, src []byte) (*Definition, error) {
	return Parse(name, src, nil)
}
