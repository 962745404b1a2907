package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Embedder is a client of an OpenAI-compatible embeddings endpoint
// (POST {base_url}/embeddings), such as OpenAI's or a local Ollama's /v1.
type Embedder struct {
	BaseURL string
	Model   string
	APIKey  string
	// HTTP is the client used; nil means one with Timeout.
	HTTP *http.Client
	// Timeout bounds one request (default 2m).
	Timeout time.Duration
	// BatchSize is how many texts go in one request (default 64).
	BatchSize int
	// MaxChars cuts longer texts before sending (default 8000), to stay
	// inside the model's context.
	MaxChars int
	// RetryWait is the first pause before retrying a 429 or 5xx answer
	// (default 1s; tests shorten it). Connection errors are not retried.
	RetryWait time.Duration
}

func (e *Embedder) url() string { return strings.TrimRight(e.BaseURL, "/") + "/embeddings" }

func (e *Embedder) batchSize() int {
	if e.BatchSize > 0 {
		return e.BatchSize
	}
	return 64
}

type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embedResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Embed returns one unit-length vector per text. Errors are EmbedErrors
// that say, in one line, what the endpoint did.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.embed(ctx, texts)
	if err != nil {
		return nil, &EmbedError{URL: e.url(), Model: e.Model, Err: err}
	}
	return vecs, nil
}

func (e *Embedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	max := e.MaxChars
	if max <= 0 {
		max = 8000
	}
	in := make([]string, len(texts))
	for i, t := range texts {
		if len(t) > max {
			t = strings.ToValidUTF8(t[:max], "")
		}
		if strings.TrimSpace(t) == "" {
			t = "(empty)"
		}
		in[i] = t
	}
	body, err := json.Marshal(embedRequest{Model: e.Model, Input: in})
	if err != nil {
		return nil, err
	}
	wait := e.RetryWait
	if wait <= 0 {
		wait = time.Second
	}
	for attempt := 0; ; attempt++ {
		vecs, retry, err := e.post(ctx, body, len(texts))
		if err == nil || !retry || attempt >= 2 {
			return vecs, err
		}
		select {
		case <-time.After(wait << attempt):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// post sends one request; retry says whether the failure may pass.
func (e *Embedder) post(ctx context.Context, body []byte, n int) ([][]float32, bool, error) {
	client := e.HTTP
	if client == nil {
		t := e.Timeout
		if t <= 0 {
			t = 2 * time.Minute
		}
		client = &http.Client{Timeout: t}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url(), bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, false, describeNetErr(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, true, fmt.Errorf("read answer: %w", err)
	}
	var out embedResponse
	jsonErr := json.Unmarshal(data, &out)
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if jsonErr == nil && out.Error != nil && out.Error.Message != "" {
			msg = out.Error.Message
		}
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return nil, retry, fmt.Errorf("HTTP %d: %s", resp.StatusCode, oneLine(msg))
	}
	if jsonErr != nil {
		return nil, false, fmt.Errorf("answer is not embeddings JSON: %v", jsonErr)
	}
	return toVectors(out, n)
}

func toVectors(out embedResponse, n int) ([][]float32, bool, error) {
	if len(out.Data) != n {
		return nil, false, fmt.Errorf("asked for %d embeddings, got %d", n, len(out.Data))
	}
	vecs := make([][]float32, n)
	dim := 0
	for i, d := range out.Data {
		idx := d.Index
		if idx < 0 || idx >= n || vecs[idx] != nil {
			idx = i // some servers leave index out
		}
		if len(d.Embedding) == 0 {
			return nil, false, fmt.Errorf("embedding %d is empty", i)
		}
		if dim == 0 {
			dim = len(d.Embedding)
		} else if len(d.Embedding) != dim {
			return nil, false, fmt.Errorf("embeddings of %d and %d dimensions in one answer", dim, len(d.Embedding))
		}
		v := d.Embedding
		if !normalize(v) {
			return nil, false, fmt.Errorf("embedding %d is zero or not a number", i)
		}
		vecs[idx] = v
	}
	for i, v := range vecs {
		if v == nil {
			return nil, false, fmt.Errorf("embedding %d is missing", i)
		}
	}
	return vecs, false, nil
}

// normalize scales v to unit length in place, so cosine is a dot product.
// It reports false for a zero vector or one holding NaN or Inf.
func normalize(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return false
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return true
}

// describeNetErr says what went wrong without repeating the URL, which
// EmbedError gives once.
func describeNetErr(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused: is the server running?")
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("no answer in time")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}
