package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ExtractError is a turn's structured output that could not be taken or
// did not match the role's meta schema, after any repair.
type ExtractError struct{ Reason string }

func (e *ExtractError) Error() string { return "structured output: " + e.Reason }

// Extractor takes a role's structured output (meta) from a turn's raw
// output, repairing it once through an OpenAI-compatible endpoint when one
// is configured.
type Extractor struct {
	// Endpoint repairs output once; nil means no repair.
	Endpoint *Endpoint
	Client   *http.Client
	Getenv   func(string) string
}

// Endpoint is an OpenAI-compatible chat endpoint (nerve.yaml's extract
// section). The key is read from the named environment variable.
type Endpoint struct {
	BaseURL   string
	Model     string
	APIKeyEnv string
	Timeout   time.Duration // 0: a minute
}

// Extract returns the meta value for a role's answer. A role without a
// schema has no meta: (nil, nil).
func (x *Extractor) Extract(ctx context.Context, role *Role, output string) (any, error) {
	if role.schema == nil {
		return nil, nil
	}
	v, err := takeJSON(output)
	if err == nil {
		err = validate(role.schema, v)
	}
	if err == nil {
		return v, nil
	}
	if x == nil || x.Endpoint == nil {
		return nil, &ExtractError{err.Error()}
	}
	repaired, rerr := x.repair(ctx, role, output, err)
	if rerr != nil {
		return nil, &ExtractError{fmt.Sprintf("%s; repair failed: %s", err, rerr)}
	}
	v, err2 := takeJSON(repaired)
	if err2 == nil {
		err2 = validate(role.schema, v)
	}
	if err2 != nil {
		return nil, &ExtractError{fmt.Sprintf("%s; still invalid after repair: %s", err, err2)}
	}
	return v, nil
}

var fenceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("(?s)```(?:json|JSON)?[ \t]*\n(.*?)\n?```") })

// takeJSON returns the JSON object of an answer: the last fenced block that
// holds one, else the whole output.
func takeJSON(output string) (any, error) {
	blocks := fenceRE().FindAllStringSubmatch(output, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		if v, err := decodeObject(blocks[i][1]); err == nil {
			return v, nil
		}
	}
	v, err := decodeObject(output)
	if err != nil {
		if len(blocks) > 0 {
			return nil, fmt.Errorf("the fenced json block is not a JSON object")
		}
		return nil, fmt.Errorf("no JSON object found (want a fenced ```json block or a JSON answer)")
	}
	return v, nil
}

func decodeObject(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("not an object")
	}
	return numbersToFloat(v), nil
}

// numbersToFloat turns json.Number into float64 or int64 so the value
// stores and marshals like any decoded JSON.
func numbersToFloat(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToFloat(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersToFloat(e)
		}
	}
	return v
}

func validate(s *jsonschema.Schema, v any) error {
	// The validator wants JSON-decoded values; round-trip to be sure.
	raw, _ := json.Marshal(v)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("does not match the meta schema: %s", oneLine(ve.Error()))
		}
		return err
	}
	return nil
}

// repair asks the endpoint once to turn the raw output into a valid object.
func (x *Extractor) repair(ctx context.Context, role *Role, output string, verr error) (string, error) {
	schema, _ := json.Marshal(role.Meta)
	body, _ := json.Marshal(map[string]any{
		"model": x.Endpoint.Model,
		"messages": []map[string]string{
			{"role": "system", "content": "You repair structured output. Reply with one JSON object only, matching this JSON Schema:\n" + string(schema)},
			{"role": "user", "content": "The answer below failed validation: " + verr.Error() + "\n\nAnswer:\n" + truncate(output, 32<<10)},
		},
		"temperature": 0,
	})
	timeout := x.Endpoint.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := strings.TrimRight(x.Endpoint.BaseURL, "/") + "/chat/completions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	getenv := x.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if x.Endpoint.APIKeyEnv != "" {
		if key := getenv(x.Endpoint.APIKeyEnv); key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	client := x.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("extract endpoint %s: %v", url, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("extract endpoint %s answered %s", url, resp.Status)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("extract endpoint %s: no choices in its answer", url)
	}
	return out.Choices[0].Message.Content, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[truncated]"
}
