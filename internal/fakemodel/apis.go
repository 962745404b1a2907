package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Each API's turn: read the request, decide, answer in its wire format.

// anthropicTurn answers POST /v1/messages.
func anthropicTurn(w http.ResponseWriter, body []byte, mode string) error {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	names, results := map[string]string{}, map[string]string{}
	for _, msg := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		json.Unmarshal(msg.Content, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				names[b.ID] = b.Name
			case "tool_result":
				results[names[b.ToolUseID]] = resultText(b.Content)
			}
		}
	}
	var offered []string
	for _, t := range req.Tools {
		offered = append(offered, t.Name)
	}
	st := decide(mode, results, offered)
	block := map[string]any{"type": "text", "text": st.text}
	stop := "end_turn"
	if st.tool != "" {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", len(req.Messages)), "name": st.tool, "input": st.args}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10}
	msg := map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		writeJSON(w, msg)
		return nil
	}
	start := map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}
	var first, delta map[string]any
	if st.tool != "" {
		first = map[string]any{"type": "tool_use", "id": block["id"], "name": st.tool, "input": map[string]any{}}
		args, _ := json.Marshal(st.args)
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(args)}
	} else {
		first = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": st.text}
	}
	sse(w,
		map[string]any{"type": "message_start", "message": start},
		map[string]any{"type": "content_block_start", "index": 0, "content_block": first},
		map[string]any{"type": "content_block_delta", "index": 0, "delta": delta},
		map[string]any{"type": "content_block_stop", "index": 0},
		map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}},
		map[string]any{"type": "message_stop"},
	)
	return nil
}

// responsesTurn answers POST /v1/responses (codex's custom provider).
func responsesTurn(w http.ResponseWriter, body []byte, mode string) error {
	var req struct {
		Model string `json:"model"`
		Input []struct {
			Type      string          `json:"type"`
			Name      string          `json:"name"`
			Namespace string          `json:"namespace"`
			CallID    string          `json:"call_id"`
			Output    json.RawMessage `json:"output"`
		} `json:"input"`
		Tools []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	names, results := map[string]string{}, map[string]string{}
	for _, it := range req.Input {
		switch it.Type {
		case "function_call":
			names[it.CallID] = it.Namespace + "/" + it.Name
		case "function_call_output":
			results[names[it.CallID]] = resultText(it.Output)
		}
	}
	var offered []string
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			for _, sub := range t.Tools {
				offered = append(offered, t.Name+"/"+sub.Name)
			}
		} else if t.Name != "" {
			offered = append(offered, t.Name)
		}
	}
	st := decide(mode, results, offered)
	var item map[string]any
	if st.tool != "" {
		args, _ := json.Marshal(st.args)
		ns, name, ok := strings.Cut(st.tool, "/")
		item = map[string]any{"type": "function_call", "id": "fc_fake", "call_id": fmt.Sprintf("call_%d", len(req.Input)),
			"name": name, "arguments": string(args), "status": "completed"}
		if ok {
			item["namespace"] = ns
		} else {
			item["name"] = st.tool
		}
	} else {
		item = map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": st.text, "annotations": []any{}}}}
	}
	resp := map[string]any{"id": "resp_fake", "object": "response", "model": req.Model, "status": "in_progress", "output": []any{}}
	done := map[string]any{"id": "resp_fake", "object": "response", "model": req.Model, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}}
	sse(w,
		map[string]any{"type": "response.created", "response": resp},
		map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item},
		map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item},
		map[string]any{"type": "response.completed", "response": done},
	)
	return nil
}

// chatTurn answers POST /v1/chat/completions (qwen, opencode).
func chatTurn(w http.ResponseWriter, body []byte, mode string) error {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	names, results := map[string]string{}, map[string]string{}
	for _, msg := range req.Messages {
		for _, tc := range msg.ToolCalls {
			names[tc.ID] = tc.Function.Name
			if tc.Function.Name == "tool_call" {
				// qwen's call of a deferred tool: its result is the tool's.
				var a struct {
					Name string `json:"name"`
				}
				json.Unmarshal([]byte(tc.Function.Arguments), &a)
				names[tc.ID] = a.Name
			}
		}
		if msg.Role == "tool" {
			results[names[msg.ToolCallID]] = resultText(msg.Content)
		}
	}
	var offered []string
	for _, t := range req.Tools {
		offered = append(offered, t.Function.Name)
	}
	st := decide(mode, results, offered)
	message := map[string]any{"role": "assistant", "content": st.text}
	finish := "stop"
	var calls []any
	if st.tool != "" {
		args, _ := json.Marshal(st.args)
		calls = []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", len(req.Messages)), "type": "function",
			"function": map[string]any{"name": st.tool, "arguments": string(args)}}}
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return nil
	}
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		c := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	delta := map[string]any{"role": "assistant", "content": st.text}
	if st.tool != "" {
		delta = map[string]any{"role": "assistant", "tool_calls": calls}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []any{chunk(delta, nil, nil), chunk(map[string]any{}, finish, usage)} {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	io.WriteString(w, "data: [DONE]\n\n")
	return nil
}

// geminiTurn answers POST …/models/M:streamGenerateContent and
// :generateContent.
func geminiTurn(w http.ResponseWriter, body []byte, stream bool, mode string) error {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionResponse *struct {
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	results := map[string]string{}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				var r struct {
					Output string `json:"output"`
				}
				json.Unmarshal(fr.Response, &r)
				if r.Output == "" {
					r.Output = string(fr.Response)
				}
				results[fr.Name] = r.Output
			}
		}
	}
	var offered []string
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			offered = append(offered, f.Name)
		}
	}
	st := decide(mode, results, offered)
	part := map[string]any{"text": st.text}
	if st.tool != "" {
		part = map[string]any{"functionCall": map[string]any{"name": st.tool, "args": st.args}}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion":  "gemini-test", "responseId": "resp_fake"}
	if !stream {
		writeJSON(w, resp)
		return nil
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\n\n", b)
	return nil
}
